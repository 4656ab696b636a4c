//! The gradient of an embedding lookup ([`SeqBackend::embedding_grad`]):
//! the output's gradient `dy [B, L, D]` added into a zero table `[V, D]`
//! at each id's row, ids in order (a dense gradient, as Burn's and
//! PyTorch's default).
//!
//! Burn's pass ([`composed`]: `select_add` into `zeros`) on burn-flex
//! allocates the zero table, copies it to align it, copies it once more
//! inside `select_add`, then adds the rows: three passes over a table that
//! for CoNLL-2003's words is 2.4 M values, at each training step and for
//! each part of a batch. [`flex`] writes one zeroed buffer and adds the
//! rows in the same order: the same values, bit for bit.
//!
//! [`SeqBackend::embedding_grad`]: super::SeqBackend::embedding_grad

use burn::backend::flex::FlexTensor;
use burn::backend::Flex;
use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{DType, Shape, TensorData, TensorMetadata};

/// Burn's gradient: `select_add` of the rows into a zero `[rows, D]` table.
pub fn composed<B: Backend>(rows: usize, grad: FloatTensor<B>, ids: IntTensor<B>) -> FloatTensor<B> {
    let d = *grad.shape().as_slice().last().expect("a gradient of rank ≥ 1");
    let n = ids.shape().num_elements();
    let table = B::float_zeros(Shape::new([rows, d]), &B::float_device(&grad), grad.dtype().into());
    let ids = B::int_reshape(ids, Shape::new([n]));
    B::float_select_add(table, 0, ids, B::float_reshape(grad, Shape::new([n, d])))
}

/// The same table written once on burn-flex's buffers; [`composed`] where
/// the gradient is not a contiguous f32 buffer, the ids not contiguous
/// integers, or an id is outside the table (Burn's pass reports it).
pub fn flex(rows: usize, grad: FlexTensor, ids: FlexTensor) -> FlexTensor {
    match host(rows, &grad, &ids) {
        Some(table) => table,
        None => composed::<Flex>(rows, grad, ids),
    }
}

fn host(rows: usize, grad: &FlexTensor, ids: &FlexTensor) -> Option<FlexTensor> {
    let g = grad.as_slice::<f32>()?;
    let d = *grad.shape().as_slice().last()?;
    let ids: Vec<usize> = match ids.dtype() {
        DType::I32 => ids.as_slice::<i32>()?.iter().map(|&i| usize::try_from(i).ok()).collect::<Option<_>>()?,
        DType::I64 => ids.as_slice::<i64>()?.iter().map(|&i| usize::try_from(i).ok()).collect::<Option<_>>()?,
        _ => return None,
    };
    if ids.len() * d != g.len() || ids.iter().any(|&i| i >= rows) {
        return None;
    }
    let mut table = vec![0.0f32; rows * d];
    if d > 0 {
        for (&id, row) in ids.iter().zip(g.chunks_exact(d)) {
            table[id * d..(id + 1) * d].iter_mut().zip(row).for_each(|(t, &v)| *t += v);
        }
    }
    Some(FlexTensor::from_data(TensorData::new(table, Shape::new([rows, d]))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::prelude::*;
    use burn::tensor::{Distribution, TensorPrimitive};

    fn bits(x: FloatTensor<Flex>) -> Vec<u32> {
        let x = Tensor::<Flex, 2>::from_primitive(TensorPrimitive::Float(x));
        x.into_data().to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect()
    }

    /// Repeated ids (whose rows are summed in order), unused rows, and a
    /// batch of one: the host table is Burn's bit for bit; an id outside
    /// the table and a strided gradient take Burn's pass.
    #[test]
    fn host_gradient_is_burns_bit_for_bit() {
        let device = Default::default();
        for (b, l, rows, d) in [(1, 1, 1, 1), (3, 5, 7, 4), (16, 30, 50, 33)] {
            let grad = Tensor::<Flex, 3>::random([b, l, d], Distribution::Normal(0.0, 1.0), &device);
            let ids: Vec<i32> = (0..b * l).map(|i| ((i * 7 + i / 3) % rows) as i32).collect();
            let ids = Tensor::<Flex, 2, Int>::from_data(TensorData::new(ids, [b, l]), &device);
            let (g, i) = (grad.into_primitive().tensor(), ids.into_primitive());
            assert_eq!(bits(flex(rows, g.clone(), i.clone())), bits(composed::<Flex>(rows, g, i)), "{b}×{l}, V {rows}");
        }
        let grad = Tensor::<Flex, 3>::random([2, 3, 4], Distribution::Normal(0.0, 1.0), &device);
        let ids = Tensor::<Flex, 2, Int>::from_data(TensorData::new(vec![0i32, 1, 2, 0, 1, 2], [2, 3]), &device);
        let strided = grad.clone().swap_dims(0, 1).into_primitive().tensor();
        assert!(host(3, &strided, &ids.clone().into_primitive()).is_none(), "strided: Burn's pass");
        let g = grad.into_primitive().tensor();
        assert!(host(2, &g, &ids.into_primitive()).is_none(), "id 2 in a table of 2 rows: Burn's pass");
    }
}
