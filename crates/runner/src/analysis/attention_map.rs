//! Attention weights of a tagged batch, cut per sentence onto the host:
//! each sentence's context self-attention and, for a QA reader, where its
//! context tokens look on the question — a cross reader's cross-attention,
//! or a concat reader's question block of the joint self-attention.

use burn::tensor::Tensor;
use corpus::batch::Batch;
use encoders::ops::SeqBackend;
#[cfg(doc)]
use encoders::tagger::TaggerOutput;
use std::ops::Range;

/// One sentence's attention: per layer `[heads, len, len]` over its real
/// tokens (for a concat reader, the context block of the joint
/// self-attention: rows then sum to the share left for the context).
#[derive(Clone, Debug, PartialEq)]
pub struct SentenceAttention {
    pub heads: usize,
    pub len: usize,
    pub layers: Vec<Vec<f32>>,
    /// A QA reader's context → question attention.
    pub question: Option<QuestionAttention>,
}

/// Where a QA reader's context tokens look on its question.
#[derive(Clone, Debug, PartialEq)]
pub struct QuestionAttention {
    /// Real question tokens.
    pub len: usize,
    /// True for a concat reader: the columns are the question's tokens then
    /// the separator, cut from the joint self-attention (each row is the
    /// share of one context token's attention on them); false for a cross
    /// reader: the columns are the question's tokens, and each row of the
    /// cross-attention sums to 1.
    pub joint: bool,
    /// Per layer `[heads, context len, columns]`.
    pub layers: Vec<Vec<f32>>,
}

impl QuestionAttention {
    /// Columns per row: the question, and the separator of a joint reader.
    pub fn columns(&self) -> usize {
        self.len + usize::from(self.joint)
    }

    /// The share of attention on the question that uniform attention over
    /// the joint `question [SEP] context` sequence would give:
    /// `|q| / (|q| + 1 + |c|)`.
    pub fn uniform_share(&self, context_len: usize) -> f64 {
        self.len as f64 / (self.len + 1 + context_len) as f64
    }

    /// `layer`'s weights averaged over `heads`: `[context len, columns]`.
    pub fn mean_over_heads(&self, layer: usize, heads: &[usize], context_len: usize) -> Vec<f32> {
        let (w, c) = (&self.layers[layer], self.columns());
        let n = heads.len().max(1) as f32;
        (0..context_len * c).map(|k| heads.iter().map(|&h| w[h * context_len * c + k]).sum::<f32>() / n).collect()
    }

    /// Per context token, the mean over `heads` of the share of its
    /// attention on the question's tokens (the separator left out) in `layer`.
    pub fn share_on_question(&self, layer: usize, heads: &[usize], context_len: usize) -> Vec<f32> {
        self.share(layer, heads, context_len, 0..self.len)
    }

    /// [`Self::share_on_question`] on the separator (0 for a cross reader).
    pub fn share_on_separator(&self, layer: usize, heads: &[usize], context_len: usize) -> Vec<f32> {
        self.share(layer, heads, context_len, self.len..self.columns())
    }

    fn share(&self, layer: usize, heads: &[usize], context_len: usize, columns: Range<usize>) -> Vec<f32> {
        let mean = self.mean_over_heads(layer, heads, context_len);
        mean.chunks(self.columns().max(1)).map(|row| row[columns.clone()].iter().sum()).collect()
    }
}

/// The maps of the batch's rows, in row order, from the tagger's weights
/// for `batch`: `attention` and `cross` of its [`TaggerOutput`] (which
/// gives their layouts).
pub fn attention_maps<B: SeqBackend>(
    attention: Vec<Tensor<B, 4>>,
    cross: Vec<Tensor<B, 4>>,
    batch: &Batch,
) -> Vec<SentenceAttention> {
    let contexts = &batch.context().lengths;
    let questions = match batch {
        Batch::Asked { question, .. } => Some(&question.lengths),
        Batch::Plain(_) => None,
    };
    // A QA reader without cross-attention weights reads `question [SEP] context`.
    let joint = questions.is_some() && cross.is_empty() && !attention.is_empty();
    let mut maps: Vec<SentenceAttention> = (0..contexts.len())
        .map(|b| SentenceAttention {
            heads: 0,
            len: contexts[b],
            layers: Vec::new(),
            question: questions.map(|q| QuestionAttention { len: q[b], joint, layers: Vec::new() }),
        })
        .collect();
    for w in attention {
        let [_, h, rows, cols] = w.dims();
        let v: Vec<f32> = w.into_data().iter::<f32>().collect();
        for (b, m) in maps.iter_mut().enumerate() {
            m.heads = h;
            let n = m.len;
            // A joint row holds the question at 0..nq, the separator at nq, the context after.
            let at = if joint { m.question.as_ref().map_or(0, |q| q.len + 1) } else { 0 };
            let row = |head: usize, i: usize| &v[((b * h + head) * rows + at + i) * cols..][..cols];
            m.layers.push(block(h, n, |head, i| &row(head, i)[at..at + n]));
            if let Some(q) = m.question.as_mut().filter(|q| q.joint) {
                let columns = q.columns();
                q.layers.push(block(h, n, |head, i| &row(head, i)[..columns]));
            }
        }
    }
    for w in cross {
        let [_, h, rows, cols] = w.dims();
        let v: Vec<f32> = w.into_data().iter::<f32>().collect();
        for (b, m) in maps.iter_mut().enumerate() {
            let n = m.len;
            let q = m.question.as_mut().expect("cross-attention weights come with questions");
            let nq = q.len;
            q.layers.push(block(h, n, |head, i| &v[((b * h + head) * rows + i) * cols..][..nq]));
        }
    }
    maps
}

/// `[heads, n, ·]` from each head's rows.
fn block<'a>(heads: usize, n: usize, row: impl Fn(usize, usize) -> &'a [f32]) -> Vec<f32> {
    (0..heads)
        .flat_map(|head| (0..n).map(move |i| (head, i)))
        .flat_map(|(head, i)| row(head, i).iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use corpus::batch::{Encoded, Example};

    fn sentence(n: usize, nq: usize) -> Example {
        let tokens = |n: usize| Encoded {
            words: vec![2; n],
            chars: vec![vec![2]; n],
            caps: vec![1; n],
            bigrams: Vec::new(),
            tags: None,
        };
        Example::Asked { context: tokens(n), question: tokens(nq), cues: vec![0; n * corpus::qa::cues::CUES] }
    }

    /// Weights `[2, 1, rows, cols]` whose entry is `100 b + 10 i + j`.
    fn numbered(rows: usize, cols: usize) -> Tensor<Flex, 4> {
        let v: Vec<f32> =
            (0..2).flat_map(|b| (0..rows * cols).map(move |k| (100 * b + 10 * (k / cols) + k % cols) as f32)).collect();
        Tensor::from_data(burn::tensor::TensorData::new(v, [2, 1, rows, cols]), &Default::default())
    }

    /// Contexts of 3 and 2 tokens, questions of 2 and 1: a concat reader's
    /// joint rows are `q q [SEP] c c c` and `q [SEP] c c`, cut into each
    /// sentence's context block and question block; a cross reader's
    /// cross-attention keeps each sentence's real rows and columns.
    #[test]
    fn joint_rows_are_cut_at_each_sentence_s_own_separator() {
        let batch = Batch::pad(&[sentence(3, 2), sentence(2, 1)], &[0, 1]);
        let maps = attention_maps(vec![numbered(6, 6)], Vec::new(), &batch);
        assert_eq!(maps[0].layers[0], [33., 34., 35., 43., 44., 45., 53., 54., 55.]);
        assert_eq!(maps[1].layers[0], [122., 123., 132., 133.]);
        let (q0, q1) = (maps[0].question.as_ref().unwrap(), maps[1].question.as_ref().unwrap());
        assert!(q0.joint && (q0.len, q1.len) == (2, 1));
        assert_eq!(q0.layers[0], [30., 31., 32., 40., 41., 42., 50., 51., 52.]);
        assert_eq!(q1.layers[0], [120., 121., 130., 131.]);
        assert_eq!(q0.share_on_question(0, &[0], 3), [61., 81., 101.]);
        assert_eq!(q1.share_on_separator(0, &[0], 2), [121., 131.]);

        let maps = attention_maps(vec![numbered(3, 3)], vec![numbered(3, 2)], &batch);
        assert_eq!(maps[1].layers[0], [100., 101., 110., 111.]);
        let (q0, q1) = (maps[0].question.as_ref().unwrap(), maps[1].question.as_ref().unwrap());
        assert!(!q0.joint && q0.columns() == 2 && q1.columns() == 1);
        assert_eq!(q0.layers[0], [0., 1., 10., 11., 20., 21.]);
        assert_eq!(q1.layers[0], [100., 110.]);
        assert_eq!(q1.share_on_separator(0, &[0], 2), [0., 0.]);
    }

    /// Two heads over 2 context tokens and a question of 2 (+ [SEP]): the
    /// drawn map is the mean of the chosen heads, the shares its row sums.
    #[test]
    fn head_means_and_shares_against_uniform() {
        let head0 = [0.1, 0.2, 0.3, 0.0, 0.4, 0.2];
        let head1 = [0.3, 0.0, 0.1, 0.2, 0.2, 0.0];
        let a = QuestionAttention { len: 2, joint: true, layers: vec![[head0, head1].concat()] };
        let close = |a: &[f32], b: &[f32]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
        assert!(close(&a.mean_over_heads(0, &[0, 1], 2), &[0.2, 0.1, 0.2, 0.1, 0.3, 0.1]));
        assert!(close(&a.mean_over_heads(0, &[1], 2), &head1));
        assert!(close(&a.share_on_question(0, &[0, 1], 2), &[0.3, 0.4]));
        assert!(close(&a.share_on_separator(0, &[0, 1], 2), &[0.2, 0.1]));
        assert!((a.uniform_share(2) - 0.4).abs() < 1e-12);
    }
}
