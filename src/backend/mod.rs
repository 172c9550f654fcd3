//! Backends. The CPU backend is the algorithms' own `run_cpu`, timed by the host clock in
//! `execute`; the CUDA backend lives in `cuda`.

pub mod cuda;
