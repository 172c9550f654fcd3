//! GPU tests of the memory peaks and the plausibility checks: the read, write and copy peaks a
//! device measures when it opens and the datasheet's (NVML) beside them; shipped kernels at
//! large sizes against the peak matching their traffic; SAXPY whose writes fit in L2 flagged
//! above its peak, not implausible; the persisting-L2 reset recorded before every case; `fresh_inputs` on a kernel computing in place. They need a CUDA GPU: ignored by a
//! plain `cargo test`, run on the GPU machine with `--include-ignored`, where a missing GPU fails
//! them (the device does not open, or every case is skipped and none passes).

use crate::common;

use common::{assert_all_passed, run_study};
use kbench::device::{Device, KernelSource};
use kbench::record::{AbovePeakCause, CaseResult, PeakKind, IMPLAUSIBLE_MARGIN};

fn run_manifest(text: &str) -> Vec<CaseResult> {
    let (_out, results) = run_study(text, KernelSource::default());
    let axes = kbench::algos::find(&results.doc.study.algorithm)
        .unwrap()
        .spec()
        .axis_names();
    let style = kbench::report::case_table::TableStyle::Terminal;
    println!(
        "{}",
        kbench::report::case_table::render(&results.doc, &axes, style)
    );
    results.doc.cases
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_read_peak_is_at_least_the_copy_and_below_the_datasheet() {
    let device = Device::open(KernelSource::default()).expect("a CUDA GPU");
    let d = &device.fingerprint;
    println!(
        "copy {:.0}, read {:.0}, write {:.0}, triad {:.0} GB/s; CUDA attributes {:.0}, datasheet {:?} GB/s",
        d.measured_copy_gbytes_per_s,
        d.measured_read_gbytes_per_s,
        d.measured_write_gbytes_per_s,
        d.measured_triad_gbytes_per_s,
        d.theoretical_memory_gbytes_per_s,
        d.datasheet_memory_gbytes_per_s
    );
    let datasheet = d
        .datasheet_memory_gbytes_per_s
        .expect("NVML's datasheet peak on the GPU machine");
    assert!(datasheet > 0.0);
    assert!(
        d.measured_read_gbytes_per_s >= d.measured_copy_gbytes_per_s,
        "read {} below copy {}",
        d.measured_read_gbytes_per_s,
        d.measured_copy_gbytes_per_s
    );
    assert!(d.measured_read_gbytes_per_s <= datasheet * (1.0 + IMPLAUSIBLE_MARGIN));
    assert!(d.measured_write_gbytes_per_s > 0.0);
    assert!(d.measured_write_gbytes_per_s <= datasheet * (1.0 + IMPLAUSIBLE_MARGIN));
    // Measured, and physical (on an H100 it read 2% above the copy: fewer bus turnarounds,
    // which other memories need not show, so that is not asserted).
    assert!(d.measured_triad_gbytes_per_s > 0.0);
    assert!(d.measured_triad_gbytes_per_s <= datasheet * (1.0 + IMPLAUSIBLE_MARGIN));
    // The reset a case gets before it runs works on this device.
    device
        .reset_persisting_l2()
        .expect("the persisting-L2 reset");
}

/// The context's persisting-L2 limit, as the driver reports it.
fn persisting_l2_limit_bytes() -> usize {
    use cudarc::driver::sys::{cuCtxGetLimit, CUlimit};
    let mut bytes = 0usize;
    // SAFETY: writes one size_t; the device's context is current on this thread.
    let status = unsafe { cuCtxGetLimit(&mut bytes, CUlimit::CU_LIMIT_PERSISTING_L2_CACHE_SIZE) };
    assert_eq!(status, cudarc::driver::sys::CUresult::CUDA_SUCCESS);
    bytes
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_reset_takes_back_a_persisting_l2_carve_out_someone_set() {
    use cudarc::driver::sys::{cuCtxSetLimit, CUlimit};
    let device = Device::open(KernelSource::default()).expect("a CUDA GPU");
    // Binds the device's context to this thread, as before every case.
    device
        .reset_persisting_l2()
        .expect("the persisting-L2 reset");
    assert_eq!(persisting_l2_limit_bytes(), 0);
    // What a kernel's host code (or a tool) could leave behind: 4 MiB set aside for persisting
    // accesses, which the cold flush could not evict.
    // SAFETY: a plain driver call on the current context, with no kernel in flight.
    let status = unsafe { cuCtxSetLimit(CUlimit::CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 4 << 20) };
    assert_eq!(status, cudarc::driver::sys::CUresult::CUDA_SUCCESS);
    assert!(persisting_l2_limit_bytes() > 0);
    device
        .reset_persisting_l2()
        .expect("the persisting-L2 reset");
    assert_eq!(persisting_l2_limit_bytes(), 0);
}

/// Every passed case: within 2% of the peak matching its traffic (or flagged implausible, which
/// fails the test too: no shipped kernel is), its reset recorded.
fn assert_within_peaks(cases: &[CaseResult], kind: PeakKind) {
    assert_all_passed(cases);
    for case in cases {
        let share = case
            .share_of_peak(None)
            .expect("a CUDA case's share of its peak");
        println!(
            "{} {:?}: {:.0} GB/s, {:.1}% of the {:?} peak {:?}",
            case.variant,
            case.params,
            case.gbytes_per_s.unwrap_or(0.0),
            share * 100.0,
            case.peak_kind,
            case.peak_gbytes_per_s
        );
        assert_eq!(case.peak_kind, Some(kind), "{}", case.variant);
        assert!(!case.implausible, "{:?}", case.implausible_reason);
        assert!(
            share <= 1.0 + IMPLAUSIBLE_MARGIN,
            "{} {:?} at {:.1}% of its peak",
            case.variant,
            case.params,
            share * 100.0
        );
        let timer = case
            .measurement
            .as_ref()
            .unwrap()
            .gpu_timer
            .as_ref()
            .unwrap();
        assert_eq!(
            timer.persisting_l2_reset,
            Some(true),
            "{:?}",
            timer.persisting_l2_reset_error
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn reduce_fast_at_2_to_the_26_stays_under_the_read_peak() {
    let text = "[study]\nname = \"gpu-peaks-reduce\"\nalgorithm = \"reduce\"\nseed = 3\n\
                [grid]\nn = [67_108_864, 268_435_456]\ndtype = [\"f32\"]\nblock = 256\n\
                [[variant]]\nname = \"fast\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
                [measure]\nwarmup = 2\nmin_samples = 20\nmax_samples = 50\n";
    assert_within_peaks(&run_manifest(text), PeakKind::Read);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn saxpy_stays_under_the_triad_peak_and_scan_under_the_copy_peak() {
    let saxpy = "[study]\nname = \"gpu-peaks-saxpy\"\nalgorithm = \"saxpy\"\nseed = 3\n\
                 [grid]\nn = [67_108_864]\na = 2.0\nblock = 256\n\
                 [[variant]]\nname = \"vector\"\nbackend = \"cuda\"\nkernel = \"saxpy_vector\"\n\
                 [measure]\nwarmup = 2\nmin_samples = 20\nmax_samples = 50\n";
    assert_within_peaks(&run_manifest(saxpy), PeakKind::Triad);
    let scan = "[study]\nname = \"gpu-peaks-scan\"\nalgorithm = \"scan\"\nseed = 3\n\
                [grid]\nn = [67_108_864]\nblock = 512\n\
                [[variant]]\nname = \"lookback\"\nbackend = \"cuda\"\nkernel = \"scan_lookback\"\n\
                [measure]\nwarmup = 2\nmin_samples = 20\nmax_samples = 50\n";
    assert_within_peaks(&run_manifest(scan), PeakKind::Copy);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn saxpy_whose_writes_fit_in_l2_is_flagged_above_its_peak_not_implausible() {
    // At 2^22 floats SAXPY writes 16 MiB, which the L2 (50 MiB on an H100 or H200) still holds
    // when the stop event fires: its GB/s over all 48 MiB is above the triad peak (and on an
    // H100 above the memory's ceiling), over the 32 MiB it must read within it.
    let saxpy = "[study]\nname = \"gpu-peaks-saxpy-l2\"\nalgorithm = \"saxpy\"\nseed = 3\n\
                 [grid]\nn = [4_194_304]\na = 2.0\nblock = 256\n\
                 [[variant]]\nname = \"vector\"\nbackend = \"cuda\"\nkernel = \"saxpy_vector\"\n\
                 [measure]\nwarmup = 2\nmin_samples = 20\nmax_samples = 50\n";
    let cases = run_manifest(saxpy);
    assert_all_passed(&cases);
    let case = &cases[0];
    let share = case.share_of_peak(None).unwrap();
    println!(
        "{:.1}% of the triad peak: {:?}",
        share * 100.0,
        case.above_peak
    );
    assert!(share > 1.0, "{:.1}% of the triad peak", share * 100.0);
    assert!(!case.implausible, "{:?}", case.implausible_reason);
    let above = case.above_peak.as_ref().expect("flagged above its peak");
    assert_eq!(above.cause, AbovePeakCause::L2, "{}", above.reason);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fresh_inputs_keep_an_in_place_kernel_right_and_count_their_copies() {
    // SAXPY computes y in place over a copy of its input y: right only if every run starts
    // from the input as it was, which fresh inputs restore from their pristine copy.
    let text = "[study]\nname = \"gpu-fresh\"\nalgorithm = \"saxpy\"\nseed = 3\n\
                [grid]\nn = [1_000_003]\na = 2.0\nblock = 256\n\
                [[variant]]\nname = \"vector\"\nbackend = \"cuda\"\nkernel = \"saxpy_vector\"\n\
                [measure]\nwarmup = 2\nmin_samples = 10\nmax_samples = 10\nfresh_inputs = true\n";
    let cases = run_manifest(text);
    assert_all_passed(&cases);
    let measurement = cases[0].measurement.as_ref().unwrap();
    let timer = measurement.gpu_timer.as_ref().unwrap();
    let runs = measurement.samples_s.len() as u64 + measurement.warmup_runs as u64;
    assert!(
        timer.fresh_input_copies >= runs,
        "{} copies for {runs} runs",
        timer.fresh_input_copies
    );
}
