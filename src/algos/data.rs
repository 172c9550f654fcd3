//! A case's data: its named host buffers (`Buffers`), each output's shape, reference and
//! tolerance (`OutputSpec`, `Length`), and the whole (`CaseData`) an algorithm's `prepare`
//! returns: what a variant reads, what it must write, and the least work it must do.

use anyhow::{anyhow, bail, Result};

use crate::vocab::{DType, Element, HostData, Tolerance};

/// Named host buffers: a case's inputs, or the outputs an implementation writes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Buffers(pub Vec<(&'static str, HostData)>);

impl Buffers {
    pub fn data(&self, name: &str) -> Result<&HostData> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| d)
            .ok_or_else(|| anyhow!("no buffer `{name}`"))
    }

    pub fn data_mut(&mut self, name: &str) -> Result<&mut HostData> {
        self.0
            .iter_mut()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| d)
            .ok_or_else(|| anyhow!("no buffer `{name}`"))
    }

    /// The buffer `name` as a slice of `T`.
    pub fn get<T: Element>(&self, name: &str) -> Result<&[T]> {
        let data = self.data(name)?;
        T::slice(data)
            .ok_or_else(|| anyhow!("buffer `{name}` holds {}, not {}", data.dtype(), T::DTYPE))
    }

    pub fn get_mut<T: Element>(&mut self, name: &str) -> Result<&mut [T]> {
        let data = self.data_mut(name)?;
        let dtype = data.dtype();
        T::slice_mut(data).ok_or_else(|| anyhow!("buffer `{name}` holds {dtype}, not {}", T::DTYPE))
    }
}

/// Where an output's produced length comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// The whole buffer.
    Full,
    /// Element 0 of the named output (a count the implementation writes), at most the capacity.
    CountIn(&'static str),
}

/// One output: its buffer's shape, how long it turns out, and what it must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSpec {
    pub name: &'static str,
    pub dtype: DType,
    /// Elements of the buffer an implementation may write.
    pub capacity: usize,
    pub length: Length,
    /// The float64 (or, for integers, exact) reference of the produced elements.
    pub reference: Vec<f64>,
    /// Before the manifest's overrides; integers are always exact.
    pub tolerance: Tolerance,
    /// `Some(input)`: the output is computed in place over a copy of that input (SAXPY's y):
    /// before each run it holds the input, not poison. (An element left unwritten still fails,
    /// since the reference differs from the input.)
    pub in_place: Option<&'static str>,
    /// `Some(indices)`: the reference covers only these elements of the output (ascending, each
    /// below the capacity; `reference[k]` is element `indices[k]`'s), where a float64 reference
    /// of every element would take too long. Only they are checked, and the results say how
    /// many of how many were. `None`: every element.
    pub checked: Option<Vec<usize>>,
    /// Elements that may fall outside the tolerance with the output still passing (a custom
    /// buffer's `check = { max_mismatches = k }`); 0 for the built-ins.
    pub max_mismatches: u64,
    /// Whether its elements are compared with `reference`: false for a custom output that the
    /// study's check command alone judges (it has no reference). True for the built-ins.
    pub compared: bool,
}

impl OutputSpec {
    /// An output of fixed length, the reference's.
    pub fn new(
        name: &'static str,
        dtype: DType,
        reference: Vec<f64>,
        tolerance: Tolerance,
    ) -> Self {
        OutputSpec {
            name,
            dtype,
            capacity: reference.len(),
            length: Length::Full,
            reference,
            tolerance,
            in_place: None,
            checked: None,
            max_mismatches: 0,
            compared: true,
        }
    }

    /// An output of `capacity` elements of which only those at `indices` (ascending) are
    /// checked, against `reference` (one value an index).
    pub fn subset(
        name: &'static str,
        dtype: DType,
        capacity: usize,
        indices: Vec<usize>,
        reference: Vec<f64>,
        tolerance: Tolerance,
    ) -> Result<Self> {
        if indices.len() != reference.len() {
            bail!(
                "output `{name}`: {} checked indices but {} reference values",
                indices.len(),
                reference.len()
            );
        }
        if indices.windows(2).any(|w| w[0] >= w[1]) || indices.last() >= Some(&capacity) {
            bail!("output `{name}`: checked indices must ascend and stay below {capacity}");
        }
        Ok(OutputSpec {
            name,
            dtype,
            capacity,
            length: Length::Full,
            reference,
            tolerance,
            in_place: None,
            checked: Some(indices),
            max_mismatches: 0,
            compared: true,
        })
    }

    /// The output's produced length is element 0 of the output `count` (which the
    /// implementation writes), at most `capacity`: the reference holds the produced elements.
    pub fn counted_by(self, count: &'static str, capacity: usize) -> Self {
        OutputSpec {
            capacity,
            length: Length::CountIn(count),
            ..self
        }
    }

    /// The output is computed in place over a copy of the input `input` (see `in_place`).
    pub fn in_place_of(self, input: &'static str) -> Self {
        OutputSpec {
            in_place: Some(input),
            ..self
        }
    }
}

/// One case's data: named inputs, each output's reference, and the least work the case must do
/// (for GB/s and GFLOP/s): the fewest bytes it must read and write, which also say which
/// measured peak its "% peak" divides by (`record::PeakKind::for_traffic`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CaseData {
    pub inputs: Buffers,
    pub outputs: Vec<OutputSpec>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub flops: u64,
    /// Elements processed (a custom study's `elements`): elements/s. 0: not declared.
    pub elements: u64,
    /// Numbers worth recording about the case (levels, colours, repeats found).
    pub facts: Vec<(&'static str, f64)>,
}

impl CaseData {
    /// Bytes read plus bytes written: what GB/s counts.
    pub fn bytes_moved(&self) -> u64 {
        self.bytes_read.saturating_add(self.bytes_written)
    }

    /// Output buffers of each output's capacity, ready for a run (see `reset_outputs`).
    pub fn output_buffers(&self) -> Buffers {
        let mut outputs = Buffers(
            self.outputs
                .iter()
                .map(|o| (o.name, HostData::zeros(o.dtype, o.capacity)))
                .collect(),
        );
        self.reset_outputs(&mut outputs);
        outputs
    }

    /// Readies the outputs for a run: poisoned, or, for one computed in place, a copy of its
    /// input.
    pub fn reset_outputs(&self, outputs: &mut Buffers) {
        for (spec, (_, data)) in self.outputs.iter().zip(&mut outputs.0) {
            match spec.in_place.and_then(|input| self.inputs.data(input).ok()) {
                Some(initial) => data.clone_from(initial),
                None => data.poison(),
            }
        }
    }

    /// Cuts each output with a data-dependent length down to what its count says, checking the
    /// count first: a count outside 0..=capacity is an error, not a reason to read past the end.
    pub fn trim_outputs(&self, outputs: &mut Buffers) -> Result<()> {
        for spec in &self.outputs {
            let Length::CountIn(count_name) = spec.length else {
                continue;
            };
            let count = outputs.data(count_name)?.to_f64().first().copied();
            let len = match count {
                Some(c) if c >= 0.0 && c <= spec.capacity as f64 && c.fract() == 0.0 => c as usize,
                other => bail!(
                    "output `{count_name}` says {} elements of `{}`, which holds at most {}",
                    other.map_or("nothing".into(), |c| c.to_string()),
                    spec.name,
                    spec.capacity
                ),
            };
            outputs.data_mut(spec.name)?.truncate(len);
        }
        Ok(())
    }
}

/// The grid's largest element count that still indexes with 32 bits, for kernels that do.
pub fn u32_size(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n)
        .map_err(|_| anyhow!("{what}: n = {n} does not fit the kernels' 32-bit indices"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_dependent_outputs_are_cut_to_their_count_and_a_bad_count_is_refused() {
        let data = CaseData {
            outputs: vec![
                OutputSpec::new("count", DType::I32, vec![2.0], Tolerance::EXACT),
                OutputSpec::new("indices", DType::I32, vec![1.0, 3.0], Tolerance::EXACT)
                    .counted_by("count", 4),
            ],
            ..CaseData::default()
        };
        let mut out = data.output_buffers();
        out.get_mut::<i32>("count").unwrap()[0] = 2;
        out.get_mut::<i32>("indices").unwrap()[..2].copy_from_slice(&[1, 3]);
        data.trim_outputs(&mut out).unwrap();
        assert_eq!(out.get::<i32>("indices").unwrap(), &[1, 3]);

        let mut out = data.output_buffers();
        out.get_mut::<i32>("count").unwrap()[0] = 5;
        let err = data.trim_outputs(&mut out).unwrap_err().to_string();
        assert!(err.contains("at most 4"), "{err}");
        // Unwritten (poisoned) counts are refused too.
        let mut out = data.output_buffers();
        assert!(data.trim_outputs(&mut out).is_err());
    }

    #[test]
    fn subset_outputs_check_their_indices_against_the_reference() {
        let tol = Tolerance::relative(1e-6);
        let out = OutputSpec::subset("r", DType::F32, 9, vec![0, 4, 8], vec![1.0; 3], tol).unwrap();
        assert_eq!(out.capacity, 9);
        assert_eq!(out.checked.as_deref(), Some(&[0, 4, 8][..]));
        assert!(OutputSpec::subset("r", DType::F32, 9, vec![0, 4], vec![1.0; 3], tol).is_err());
        assert!(OutputSpec::subset("r", DType::F32, 9, vec![4, 0], vec![1.0; 2], tol).is_err());
        assert!(OutputSpec::subset("r", DType::F32, 9, vec![0, 9], vec![1.0; 2], tol).is_err());
        assert!(OutputSpec::subset("r", DType::F32, 9, vec![3, 3], vec![1.0; 2], tol).is_err());
    }
}
