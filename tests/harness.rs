//! The generic correctness harness: every CPU implementation of every registered algorithm, on
//! the test grid the algorithm declares (awkward sizes: 0 or 1 where legal, primes, non-powers
//! of two), through the real pipeline (manifest, plan, case), each output checked against its
//! reference. No per-algorithm code: a new algorithm is covered by registering it. The GPU side is
//! tests/gpu.rs.

use crate::common;

use std::path::Path;

use kbench::device::KernelSource;
use kbench::record::CaseResult;
use kbench::run::case::{self, CaseSettings};
use kbench::run::executor::GpuState;

#[test]
fn every_cpu_implementation_of_every_algorithm_matches_its_reference() {
    for algorithm in kbench::algos::all() {
        let spec = algorithm.spec();
        let mut text = format!(
            "[study]\nname = \"harness-{name}\"\nalgorithm = \"{name}\"\nseed = 101\n[grid]\n{grid}\n",
            name = spec.name,
            grid = spec.test_grid
        );
        for implementation in &spec.cpu_impls {
            text += &format!(
                "[[variant]]\nname = \"{implementation}\"\nbackend = \"cpu\"\nimpl = \"{implementation}\"\n"
            );
        }
        text += common::QUICK;
        let manifest = kbench::manifest::parse(Path::new("harness.toml"), &text)
            .unwrap_or_else(|e| panic!("{}'s test grid: {e}", spec.name));
        let cases = kbench::plan::expand(&manifest).unwrap();
        assert!(
            cases.len() >= spec.cpu_impls.len() * 3,
            "{}: the test grid should have several points",
            spec.name
        );
        let dir = tempfile::tempdir().unwrap();
        let results_path = dir.path().join("r.json");
        let settings = CaseSettings {
            measure: &manifest.measure,
            save_outputs: None,
            results_path: &results_path,
        };
        let mut gpu = GpuState::NotOpened(KernelSource::default());
        let study = case::WorkerStudy::of(&manifest);
        let results: Vec<CaseResult> = cases
            .iter()
            .map(|c| case::run_case(&study, c, &mut gpu, &settings, &mut |_| {}))
            .collect();
        common::assert_all_passed(&results);
        for result in &results {
            assert!(
                !result.outputs.is_empty(),
                "{}: no output checked",
                spec.name
            );
        }
        println!("{}: {} CPU cases passed", spec.name, results.len());
    }
}

/// The harness fails a wrong implementation: the manifest's tolerance set so tight that the
/// float sums' ordinary rounding is outside it.
#[test]
fn the_harness_fails_what_is_wrong() {
    let text = format!(
        "[study]\nname = \"t\"\nalgorithm = \"reduce\"\nseed = 3\n[grid]\nn = [100_003]\ndtype = \"f32\"\n\
         [[variant]]\nname = \"s\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [accuracy]\nrel_tol = {{ f32 = 1e-12 }}\n{}",
        common::QUICK
    );
    let manifest = kbench::manifest::parse(Path::new("t.toml"), &text).unwrap();
    let case = &kbench::plan::expand(&manifest).unwrap()[0];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let settings = CaseSettings {
        measure: &manifest.measure,
        save_outputs: None,
        results_path: &path,
    };
    let mut gpu = GpuState::NotOpened(KernelSource::default());
    let study = case::WorkerStudy::of(&manifest);
    let result = case::run_case(&study, case, &mut gpu, &settings, &mut |_| {});
    assert_eq!(result.status, kbench::record::CaseStatus::AccuracyFailed);
    assert!(result.reason.unwrap().contains("`sum`"));
}

/// tests/gpu.rs runs these only on a GPU machine; a grid the manifest rules reject (a block that
/// is not a power of two, say) would be found there first. Here it is found without one.
#[test]
fn every_algorithms_gpu_test_grid_is_a_manifest_kbench_accepts() {
    for algorithm in kbench::algos::all() {
        let spec = algorithm.spec();
        let text = common::gpu_test_grid_manifest(spec, None);
        if let Err(e) = kbench::manifest::parse(Path::new("gpu-test-grid.toml"), &text) {
            panic!("{}'s GPU test grid: {e}\n{text}", spec.name);
        }
    }
}
