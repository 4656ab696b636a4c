//! The character CNN's features ([`SeqBackend::char_cnn`]): each word's
//! characters embedded, convolved ('same' padding, stride 1) and max-pooled
//! over its real characters.
//!
//! - [`composed`]: the convolution as one product (im2col) from Burn's
//!   tensor operations; what training differentiates, on every backend.
//! - [`host`]: inference on the CPU backends. A convolution over embedded
//!   characters is a sum of per-offset lookups, `conv[p] = b + Σ_o T_o[id(p
//!   + o − before)]` with `T_o = E · W_o` (`[V, F]`, one per kernel offset
//!   `o`), so the tables are computed once per call (a `[V, C] · [C, F]`
//!   product per offset) and each character position costs `K·F` additions
//!   instead of `K·C·F` multiply-adds, with no `[N·W, K·C]` windows and no
//!   `[F, N·W]` product written out. Where the vocabulary is larger than
//!   the batch's character positions (a character-level Chinese corpus,
//!   one character per token), the tables would cost more than they save,
//!   and [`composed`] runs instead.
//!
//! Both give the same values up to the order of the sums (tested).
//!
//! [`SeqBackend::char_cnn`]: super::SeqBackend::char_cnn

use burn::prelude::*;
use burn::tensor::module::embedding;

/// `chars [N, W]` (character ids, 0 at padding), `table [V, C]` (the
/// embedding; row 0, padding, is read as zeros), `kernel [F, C, K]` (a
/// `Conv1d` weight), `bias [F]` → `[N, F]`: per word, the max over its real
/// characters of the convolution, zeros for a word with none.
pub fn composed<B: Backend>(
    table: Tensor<B, 2>,
    kernel: Tensor<B, 3>,
    bias: Option<Tensor<B, 1>>,
    chars: Tensor<B, 2, Int>,
) -> Tensor<B, 2> {
    let [n, w] = chars.dims();
    let [f, c, k] = kernel.dims();
    let (before, after) = ((k - 1) / 2, k - 1 - (k - 1) / 2);
    let device = chars.device();
    let real = chars.clone().greater_elem(0).float(); // [N, W]

    // Each position's window of K characters side by side, [N·W, K·C],
    // against the kernel as [F, K·C]. The windows are gathered straight from
    // the embedding table by their character ids (id 0 beyond the word's
    // edges, as at padding), from a table whose row 0 is zeroed: padding
    // characters are zero vectors, and no [N, W, C] embedding is padded,
    // sliced and copied K times.
    let pad = |len: usize| Tensor::<B, 2, Int>::zeros([n, len], &device);
    let ids = Tensor::cat(vec![pad(before), chars, pad(after)], 1); // [N, W+K−1]
    let windows = Tensor::stack::<3>((0..k).map(|o| ids.clone().slice([0..n, o..o + w])).collect(), 2); // [N, W, K]
    let vocab = table.dims()[0];
    let not_padding = Tensor::<B, 1>::ones([vocab], &device).slice_assign([0..1], Tensor::zeros([1], &device));
    let table = table * not_padding.reshape([vocab, 1]); // [V, C], row 0 zero
    let windows = embedding(table, windows.reshape([n, w * k])).reshape([n * w, k * c]); // [N·W, K·C]

    // weight [F, C, K] → [F, K, C] → [F, K·C], columns in the windows' order
    // (offset, channel). Filters first, so that the max over each word's
    // characters runs along the last, contiguous dimension.
    let kernel = kernel.permute([0, 2, 1]).reshape([f, k * c]);
    let mut conv = kernel.matmul(windows.transpose()); // [F, N·W]
    if let Some(bias) = bias {
        conv = conv + bias.reshape([f, 1]);
    }

    // Max over real characters only (padding positions get −1e4 added), and
    // zeros for words with no characters at all (padding tokens).
    let real = real.reshape([1, n * w]);
    let pooled = (conv + (real.clone() - 1.0) * 1.0e4).reshape([f, n, w]).max_dim(2).reshape([f, n]);
    let any = real.reshape([1, n, w]).max_dim(2).reshape([1, n]);
    (pooled * any).transpose() // [N, F]
}

/// The CPU backends' inference: per-offset tables and host loops.
pub mod host {
    use super::*;
    use crate::ops::host::{matmul, tensor, to_vec};
    use rayon::prelude::*;

    /// Words per rayon task.
    const WORDS_PER_TASK: usize = 64;

    /// [`composed`]'s function by per-offset tables (see the module's
    /// notes); [`composed`] itself where the vocabulary outnumbers the
    /// batch's character positions.
    pub fn forward<B: Backend>(
        table: Tensor<B, 2>,
        kernel: Tensor<B, 3>,
        bias: Option<Tensor<B, 1>>,
        chars: Tensor<B, 2, Int>,
    ) -> Tensor<B, 2> {
        let [n, w] = chars.dims();
        let [v, c] = table.dims();
        let [f, _, k] = kernel.dims();
        if v > n * w {
            return composed(table, kernel, bias, chars);
        }
        let device = chars.device();
        let tables = offset_tables(&to_vec(table), &to_vec(kernel), v, c, f, k); // [K, V, F]
        let bias = bias.map(to_vec).unwrap_or_else(|| vec![0.0; f]);
        let ids: Vec<i64> = chars.into_data().iter::<i64>().collect(); // [N, W]
        let mut out = vec![0.0f32; n * f];
        let before = (k - 1) / 2;
        out.par_chunks_mut(WORDS_PER_TASK * f).enumerate().for_each(|(task, out)| {
            let mut acc = vec![0.0f32; f];
            for (j, word) in out.chunks_mut(f).enumerate() {
                let i = task * WORDS_PER_TASK + j;
                pool_word(&ids[i * w..(i + 1) * w], &tables, &bias, (v, k, before), &mut acc, word);
            }
        });
        tensor(out, [n, f], &device)
    }

    /// `T_o = E · W_o` for each kernel offset `o`, `[K, V, F]`, row 0 (padding) zero.
    fn offset_tables(table: &[f32], kernel: &[f32], v: usize, c: usize, f: usize, k: usize) -> Vec<f32> {
        let mut tables = vec![0.0f32; k * v * f];
        let mut w_o = vec![0.0f32; c * f]; // [C, F]
        for o in 0..k {
            for ch in 0..c {
                for filter in 0..f {
                    w_o[ch * f + filter] = kernel[(filter * c + ch) * k + o]; // kernel [F, C, K]
                }
            }
            let t_o = &mut tables[o * v * f..(o + 1) * v * f];
            matmul(v - 1, f, c, &mut t_o[f..], f, false, &table[c..], c, false, &w_o, f, false);
        }
        tables
    }

    /// One word's features into `out [F]`: the max over its real characters
    /// of `bias + Σ_o T_o[id(p + o − before)]`, zeros if it has none.
    fn pool_word(
        ids: &[i64],
        tables: &[f32],
        bias: &[f32],
        (v, k, before): (usize, usize, usize),
        acc: &mut [f32],
        out: &mut [f32],
    ) {
        let (f, w) = (out.len(), ids.len());
        let mut any = false;
        out.fill(f32::NEG_INFINITY);
        for p in (0..w).filter(|&p| ids[p] > 0) {
            any = true;
            acc.copy_from_slice(bias);
            for o in 0..k {
                let Some(q) = (p + o).checked_sub(before).filter(|&q| q < w) else { continue };
                let id = ids[q] as usize;
                if id > 0 {
                    let row = &tables[(o * v + id) * f..(o * v + id + 1) * f];
                    acc.iter_mut().zip(row).for_each(|(a, t)| *a += t);
                }
            }
            out.iter_mut().zip(acc.iter()).for_each(|(m, a)| *m = m.max(*a));
        }
        if !any {
            out.fill(0.0);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::ops::host::close;
        use burn::backend::{Flex, NdArray};
        use burn::tensor::{Distribution, TensorData};

        fn check<B: Backend>() {
            let device = Default::default();
            // 6 words × up to 5 characters; 0 is padding (a padding word,
            // one-character words, a full word).
            let ids: Vec<i64> = vec![
                3, 4, 5, 0, 0, /**/ 6, 0, 0, 0, 0, /**/ 7, 8, 9, 10, 11, //
                12, 13, 0, 0, 0, /**/ 0, 0, 0, 0, 0, /**/ 5, 5, 5, 0, 0,
            ];
            let chars = || Tensor::<B, 2, Int>::from_data(TensorData::new(ids.clone(), [6, 5]), &device);
            for k in [1, 2, 3, 4, 5] {
                let normal = Distribution::Normal(0.0, 1.0);
                let table = Tensor::<B, 2>::random([14, 6], normal, &device);
                let kernel = Tensor::<B, 3>::random([7, 6, k], normal, &device);
                let bias = Tensor::<B, 1>::random([7], normal, &device);
                for bias in [Some(bias), None] {
                    let ours = forward(table.clone(), kernel.clone(), bias.clone(), chars());
                    let want = composed(table.clone(), kernel.clone(), bias, chars());
                    close(ours.clone(), want, &format!("kernel width {k}"));
                    let padding_word = ours.slice([4..5, 0..7]).into_data().to_vec::<f32>().unwrap();
                    assert_eq!(padding_word, vec![0.0; 7], "a word without characters gets zeros");
                }
            }
        }

        #[test]
        fn char_cnn_by_offset_tables_equals_the_composed_product() {
            check::<Flex>();
            check::<NdArray>();
        }

        #[test]
        fn char_cnn_with_a_vocabulary_larger_than_the_batch_runs_the_product() {
            let device = Default::default();
            let chars = Tensor::<Flex, 2, Int>::from_data(TensorData::new(vec![3i64, 0, 7, 2], [2, 2]), &device);
            let table = Tensor::<Flex, 2>::random([9, 4], Distribution::Normal(0.0, 1.0), &device);
            let kernel = Tensor::<Flex, 3>::random([5, 4, 3], Distribution::Normal(0.0, 1.0), &device);
            let ours = forward(table.clone(), kernel.clone(), None, chars.clone());
            let want = composed(table, kernel, None, chars);
            // The same operations, so the same values to the last bit.
            assert_eq!(ours.into_data().to_vec::<f32>().unwrap(), want.into_data().to_vec::<f32>().unwrap());
        }
    }
}
