//! Every kernel file compiles with NVRTC for sm_90 and sm_80, and exports every kernel its
//! algorithm registers, for each dtype the algorithm takes. NVRTC needs no GPU, but it is not on
//! a fresh machine: these tests are ignored by a plain `cargo test` and run by CI (which installs
//! NVRTC from pip) and on the GPU machine with `--include-ignored`.

use kbench::algos::AxisKind;
use kbench::device::{nvrtc, KernelSource};
use kbench::vocab::DType;

#[test]
#[ignore = "needs NVRTC"]
fn every_kernel_compiles_for_hopper_and_ampere() {
    nvrtc::nvrtc_present().unwrap_or_else(|e| panic!("{e}"));
    let archs = ["sm_90".to_string(), "sm_80".to_string()];
    let files = kbench::algos::kernel_files();
    let compiled = nvrtc::compile_all(&KernelSource::default(), &files, &archs)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(compiled.len(), files.len() * archs.len());
    for algorithm in kbench::algos::all() {
        let spec = algorithm.spec();
        let ptx = &compiled
            .iter()
            .find(|c| c.file == spec.kernel_file.name && c.arch == "sm_90")
            .unwrap()
            .ptx;
        // Each kernel exists for every dtype its algorithm's `dtype` axis takes; for an algorithm
        // without one, as an entry of its name, or entries named after it (a launcher of
        // several kernels: repeats_seed_flags, repeats_seed_scatter). Library calls (cuBLAS) have
        // none.
        let dtypes: Vec<Option<DType>> = match spec.axis("dtype").map(|a| a.kind) {
            Some(AxisKind::Dtype(allowed)) => allowed.iter().copied().map(Some).collect(),
            _ => vec![None],
        };
        for kernel in spec
            .kernels
            .iter()
            .filter(|k| !spec.library_kernels.contains(k))
        {
            for dtype in &dtypes {
                // A launcher may pick among several entries of one dtype (durbin_schur_f64_j40).
                let found = match dtype {
                    Some(d) => {
                        ptx.contains(&format!(".entry {kernel}_{}(", d.name()))
                            || ptx.contains(&format!(".entry {kernel}_{}_", d.name()))
                    }
                    None => {
                        ptx.contains(&format!(".entry {kernel}("))
                            || ptx.contains(&format!(".entry {kernel}_"))
                    }
                };
                assert!(
                    found,
                    "{} has no entry for {kernel} {dtype:?}",
                    spec.kernel_file.name
                );
            }
        }
    }
}

#[test]
#[ignore = "needs NVRTC"]
fn durbin_schurs_entries_have_the_slots_and_launch_bounds_of_its_table() {
    nvrtc::nvrtc_present().unwrap_or_else(|e| panic!("{e}"));
    let files: Vec<_> = (kbench::algos::kernel_files().into_iter())
        .filter(|f| f.name == "durbin.cu")
        .collect();
    let compiled = nvrtc::compile_all(&KernelSource::default(), &files, &["sm_90".to_string()])
        .unwrap_or_else(|e| panic!("{e:#}"));
    let ptx = &compiled[0].ptx;
    let mut entries = 0;
    for &(slots, f32_block, f64_block) in kbench::algos::durbin::SCHUR_SLOTS {
        for (dtype, block) in [("f32", f32_block), ("f64", f64_block)] {
            let entry = format!(".entry durbin_schur_{dtype}_j{slots}(");
            let Some(at) = ptx.find(&entry) else {
                assert_eq!(block, 0, "{entry} is in the table but not in durbin.cu");
                continue;
            };
            assert_ne!(block, 0, "{entry} is in durbin.cu but not in the table");
            // The directives follow the parameter list: `.maxntid B, 1, 1`.
            let directives = &ptx[at..at + ptx[at..].find('{').unwrap()];
            assert!(
                directives.contains(&format!(".maxntid {block}, 1, 1")),
                "{entry}: {directives}"
            );
            entries += 1;
        }
    }
    assert_eq!(ptx.matches(".entry durbin_schur_").count(), entries);
}

#[test]
#[ignore = "needs NVRTC"]
fn a_compile_error_carries_the_file_and_nvrtc_log() {
    nvrtc::nvrtc_present().unwrap_or_else(|e| panic!("{e}"));
    let err = nvrtc::compile(
        "kernels/broken.cu",
        "extern \"C\" __global__ void k() { int x = nope; }\n",
        "sm_90",
    )
    .unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("kernels/broken.cu(1)"), "{text}");
    assert!(text.contains("identifier \"nope\" is undefined"), "{text}");
}

#[test]
#[ignore = "needs NVRTC"]
fn an_error_in_the_common_header_names_the_header_and_its_line() {
    nvrtc::nvrtc_present().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("common.cuh"),
        "// line 1\nint broken = nope;\n",
    )
    .unwrap();
    let source = KernelSource {
        dir: Some(dir.path().to_path_buf()),
    };
    std::fs::write(
        dir.path().join("reduce.cu"),
        "#include \"common.cuh\"\nextern \"C\" __global__ void k() {}\n",
    )
    .unwrap();
    let file = kbench::algos::find("reduce").unwrap().spec().kernel_file;
    let text = source.read(&file).unwrap();
    let err = nvrtc::compile(&source.describe(&file), &text, "sm_90").unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("common.cuh(2)"), "{text}");
}
