//! Energy and clocks per case on a real GPU (issue 30): NVML's energy counter around each CUDA
//! case's energy window gives a finite, positive energy per run at a board power an H100 or H200
//! can draw, and the clocks read after the samples are there. Needs a CUDA GPU with NVML:
//! ignored by a plain `cargo test`, run on the GPU machine with `--include-ignored`, where a
//! missing GPU or NVML fails it.

use crate::common;

use common::{assert_all_passed, run_study};
use kbench::device::KernelSource;
use kbench::vocab::ParamValue;

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_reduction_records_joules_per_run_power_and_clocks() {
    let text = "[study]\nname = \"gpu-energy\"\nalgorithm = \"reduce\"\nseed = 30\n\
                [grid]\nn = [16_384, 16_777_216]\ndtype = \"f32\"\nblock = 256\n\
                [[variant]]\nname = \"fast\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
                [[variant]]\nname = \"fast_transfers\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\nscope = \"transfers\"\n\
                [measure]\nwarmup = 2\nmin_samples = 10\nmax_samples = 50\n";
    let (_out, results) = run_study(text, KernelSource::default());
    let doc = &results.doc;
    let device = doc.environment.device.as_ref().expect("a GPU run");
    assert_eq!(device.nvml_unavailable, None, "NVML is needed here");
    assert_eq!(device.energy_unavailable, None, "the energy counter too");
    assert_all_passed(&doc.cases);
    for case in &doc.cases {
        let energy = case
            .energy()
            .unwrap_or_else(|| panic!("no energy record: {:?}", case.gpu_timer()));
        println!(
            "{} n={}: {:?}; median {:.3e} s",
            case.variant,
            case.params["n"],
            energy,
            case.summary.as_ref().unwrap().median_s
        );
        assert!(
            energy.joules_per_run.is_finite() && energy.joules_per_run > 0.0,
            "{energy:?}"
        );
        assert!((10.0..=1000.0).contains(&energy.power_w), "{energy:?}");
        assert!(energy.runs >= 1 && energy.window_s > 0.0, "{energy:?}");
        let clocks = case.clocks().expect("clocks read after the samples");
        assert!(clocks.sm_clock_median_mhz.is_some_and(|mhz| mhz > 100));
        assert!(clocks.memory_clock_median_mhz.is_some_and(|mhz| mhz > 100));
    }
    // The large kernel's runs fill the window (64 MiB read a run, more than the L2): its energy
    // a run is its power times its time, within what the hot window and the idle gaps allow.
    let large = (doc.cases.iter())
        .find(|c| c.variant == "fast" && c.params["n"] == ParamValue::Int(16_777_216))
        .unwrap();
    let energy = large.energy().unwrap();
    let median_s = large.summary.as_ref().unwrap().median_s;
    let ratio = energy.joules_per_run / (energy.power_w * median_s);
    assert!(
        (0.5..=2.0).contains(&ratio),
        "{ratio}: {energy:?}, {median_s} s"
    );
    assert!(energy.window_s >= 0.05, "{energy:?}");
}
