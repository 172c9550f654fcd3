//! Where a case's time goes: each piece of work a worker does for a case is timed under the
//! stage it serves (`Stage`), and `take` hands the totals over as the case's `Overhead`. A stage
//! timed inside another (a compile while the launcher is made during sampling) counts for the
//! inner stage alone, so the totals add up to at most the time they cover.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::record::Overhead;

/// What a case's time was spent on, in the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Opening the GPU: the context, the device's record, its measured peaks.
    Setup,
    /// Making the inputs: random draws, `.npy` files, copies and expressions.
    Inputs,
    /// The expected outputs: a reference command, a reference kernel's run, `.npy` files.
    Reference,
    /// NVRTC and loading the module.
    Compile,
    /// Copies to and from the GPU outside the timed runs.
    Transfers,
    /// The warm-up and the timed samples.
    Sampling,
    /// Runs after the samples: traced, profiled, the energy window.
    ExtraRuns,
    /// Checking the outputs and saving them.
    Checking,
}

const STAGES: usize = 8;

fn slot(stage: Stage) -> usize {
    stage as usize
}

#[derive(Default)]
struct Clock {
    totals: [Duration; STAGES],
    /// The stages entered and not left, innermost last, each with when it last resumed.
    open: Vec<(Stage, Instant)>,
}

thread_local! {
    static CLOCK: RefCell<Clock> = RefCell::default();
}

/// Runs `work`, its time counted for `stage` (less any stage timed inside it).
pub fn time<T>(stage: Stage, work: impl FnOnce() -> T) -> T {
    let _entered = Entered::new(stage);
    work()
}

/// A stage entered: its time counts until this is dropped (also while a panic unwinds), which
/// resumes the enclosing stage's clock. For a stage that ends mid-function; `time` otherwise.
pub struct Entered;

impl Entered {
    pub fn new(stage: Stage) -> Entered {
        CLOCK.with_borrow_mut(|clock| {
            let now = Instant::now();
            if let Some((outer, since)) = clock.open.last().copied() {
                clock.totals[slot(outer)] += now - since;
            }
            clock.open.push((stage, now));
        });
        Entered
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        CLOCK.with_borrow_mut(|clock| {
            let now = Instant::now();
            if let Some((stage, since)) = clock.open.pop() {
                clock.totals[slot(stage)] += now - since;
            }
            if let Some((_, since)) = clock.open.last_mut() {
                *since = now;
            }
        });
    }
}

/// The totals since the last `take` on this thread, as a case's overhead (its `other_s` left
/// for whoever knows the case's wall time), and the clock set back to zero.
pub fn take() -> Overhead {
    let totals = CLOCK.with_borrow_mut(|clock| std::mem::take(&mut clock.totals));
    let s = |stage: Stage| totals[slot(stage)].as_secs_f64();
    Overhead {
        setup_s: s(Stage::Setup),
        inputs_s: s(Stage::Inputs),
        reference_s: s(Stage::Reference),
        compile_s: s(Stage::Compile),
        transfers_s: s(Stage::Transfers),
        sampling_s: s(Stage::Sampling),
        extra_runs_s: s(Stage::ExtraRuns),
        checking_s: s(Stage::Checking),
        other_s: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(ms: u64) {
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {}
    }

    #[test]
    fn a_nested_stage_counts_for_itself_alone_and_take_starts_again() {
        take();
        time(Stage::Sampling, || {
            spin(20);
            time(Stage::Compile, || spin(30));
            spin(20);
        });
        let first = take();
        assert!((0.029..0.060).contains(&first.compile_s), "{first:?}");
        assert!((0.039..0.080).contains(&first.sampling_s), "{first:?}");
        assert_eq!(first.inputs_s, 0.0);
        assert_eq!(take().sampling_s, 0.0);
    }

    #[test]
    fn a_panic_inside_a_stage_leaves_it() {
        take();
        let caught = std::panic::catch_unwind(|| time(Stage::Inputs, || panic!("inside")));
        assert!(caught.is_err());
        time(Stage::Checking, || spin(5));
        let after = take();
        assert!(after.checking_s >= 0.004, "{after:?}");
        CLOCK.with_borrow(|clock| assert!(clock.open.is_empty()));
    }
}
