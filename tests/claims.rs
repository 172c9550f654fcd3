//! Claims judged on synthetic results (holds, refuted, inconclusive, skipped, each kind), and the
//! declared tables drawn from them (snapshots).

use std::path::Path;

use kbench::claims::judge_all;
use kbench::manifest::Manifest;
use kbench::record::{CaseResult, CaseStatus, ClaimStatus, ClaimVerdict, ResultsDoc};
use kbench::report::case_table::TableStyle;
use kbench::report::declared_tables;
use kbench::results::ResultsFile;

const MANIFEST: &str = r#"
[study]
name = "claims"
algorithm = "reduce"
seed = 1

[grid]
n = [1_000_000, 2_000_000, 4_000_000]
dtype = ["f32", "f64"]

[[variant]]
name = "cpu"
backend = "cpu"
impl = "sequential"

[[variant]]
name = "fast"
backend = "cuda"
kernel = "reduce_fast"

[[variant]]
name = "naive"
backend = "cuda"
kernel = "reduce_naive"

[[table]]
title = "Median by size"
rows = "variant"
columns = "n"
value = "median"
select = { dtype = "f32" }

[[table.reference]]
label = "a report"
source = "its table 1"
unit = "ms"
values = { 1000000 = 9.5, 4000000 = 40.0 }

[[table]]
title = "Speedup over the CPU"
rows = "dtype"
columns = "variant"
value = "speedup"
baseline = "cpu"
variants = ["fast", "naive"]
select = { n = 4_000_000 }

[[claim]]
text = "fast beats the CPU by 5x"
source = "a report"
kind = "faster"
a = "fast"
b = "cpu"
by = 5.0

[[claim]]
text = "fast beats the CPU by 20x"
source = "a report"
kind = "faster"
a = "fast"
b = "cpu"
by = 20.0

[[claim]]
text = "naive is as fast as fast"
source = "a report"
kind = "faster"
a = "naive"
b = "fast"

[[claim]]
text = "fast reaches 80% of the copy"
source = "kbench"
kind = "reaches_peak"
a = "fast"
share = 0.8

[[claim]]
text = "every case is right"
source = "kbench"
kind = "passes"
variants = ["cpu", "fast", "naive"]

[[claim]]
text = "the CPU's time rises with n"
source = "kbench"
kind = "rises"
a = "cpu"
quantity = "median"
along = "n"

[[claim]]
text = "fast's bandwidth falls with n"
source = "kbench"
kind = "falls"
a = "fast"
quantity = "gbytes_per_s"
along = "n"
"#;

/// Samples around `median_s`, spread by a tenth of a percent, deterministic.
fn samples(median_s: f64) -> Vec<f64> {
    (0..21)
        .map(|i| median_s * (1.0 + 0.001 * ((i * 7 % 11) as f64 - 5.0)))
        .collect()
}

/// A finished run of MANIFEST whose cases `time` says how long each took (None: skipped).
fn synthetic(time: impl Fn(&str, u64, &str) -> Option<f64>) -> (Manifest, ResultsDoc) {
    let manifest = kbench::manifest::parse(Path::new("claims.toml"), MANIFEST).unwrap();
    let cases = kbench::plan::expand(&manifest).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut file = ResultsFile::create(
        dir.path(),
        &manifest,
        cases.len(),
        manifest.measure.clone(),
        None,
    )
    .unwrap();
    for case in &cases {
        let mut result: CaseResult = kbench::run::case::new_result(&manifest, case);
        let n = match case.params["n"] {
            kbench::vocab::ParamValue::Int(n) => n as u64,
            _ => unreachable!(),
        };
        let dtype = case.params["dtype"].to_string();
        match time(&result.variant, n, &dtype) {
            None => {
                result.status = CaseStatus::Skipped;
                result.reason = Some("no CUDA driver".into());
            }
            Some(median_s) => {
                let s = samples(median_s);
                result.status = CaseStatus::Passed;
                result.bytes_moved = 4 * n;
                result.summary = Some(kbench::stats::summarize(&s));
                result.gbytes_per_s = Some(4.0 * n as f64 / median_s / 1e9);
                result.measurement = Some(kbench::record::Measurement {
                    samples_s: s,
                    warmup_runs: 1,
                    stop_reason: kbench::record::StopReason::MaxSamples,
                    throttled_discarded: 0,
                    gpu_timer: None,
                    process_medians_s: Vec::new(),
                });
                result.outputs = vec![kbench::record::OutputCheck {
                    name: "sum".into(),
                    length: 1,
                    accuracy: kbench::verify::compare(
                        &[1.0],
                        &[1.0],
                        kbench::vocab::Tolerance::EXACT,
                    ),
                }];
            }
        }
        file.push(result).unwrap();
    }
    let mut doc = file.doc;
    doc.environment.device = Some(kbench::record::DeviceFingerprint {
        name: "Synthetic GPU".into(),
        host: String::new(),
        pci_bus_id: String::new(),
        compute_capability: "9.0".into(),
        sm_count: 132,
        total_memory_bytes: 1 << 36,
        l2_cache_bytes: 50 << 20,
        sm_clock_mhz: 1980.0,
        memory_clock_mhz: 2619.0,
        memory_bus_width_bits: 5120,
        theoretical_memory_gbytes_per_s: 3352.0,
        driver_version: "580.0".into(),
        nvrtc_version: "13.0".into(),
        measured_copy_gbytes_per_s: 1000.0,
        measured_read_gbytes_per_s: 0.0,
        measured_write_gbytes_per_s: 0.0,
        measured_triad_gbytes_per_s: 0.0,
        datasheet_memory_gbytes_per_s: None,
        host_to_device_gbytes_per_s: 50.0,
        device_to_host_gbytes_per_s: 50.0,
        event_overhead_s: 1.2e-6,
        cupti_unavailable: None,
        cupti_profiler_unavailable: None,
        nvml_unavailable: None,
        energy_unavailable: None,
        peaks_unmeasured: None,
        mock: None,
    });
    (manifest, doc)
}

/// The CPU at 1 GB/s, fast at 900 GB/s (4 bytes an element, times as n grows a little slower),
/// naive ten times slower than fast.
fn time(variant: &str, n: u64, _dtype: &str) -> Option<f64> {
    let bytes = 4.0 * n as f64;
    Some(match variant {
        "cpu" => bytes / 1e9,
        "fast" => bytes / 900e9 * (1.0 + n as f64 / 4e7),
        _ => bytes / 90e9,
    })
}

fn verdict<'a>(verdicts: &'a [ClaimVerdict], text: &str) -> &'a ClaimVerdict {
    verdicts.iter().find(|v| v.text == text).unwrap()
}

#[test]
fn each_kind_of_claim_holds_is_refuted_or_stays_inconclusive_on_the_evidence() {
    let (manifest, doc) = synthetic(time);
    let verdicts = judge_all(&manifest, &doc);
    let status = |text| verdict(&verdicts, text).status;
    assert_eq!(status("fast beats the CPU by 5x"), ClaimStatus::Holds);
    assert_eq!(status("fast beats the CPU by 20x"), ClaimStatus::Holds);
    assert_eq!(status("naive is as fast as fast"), ClaimStatus::Refuted);
    assert_eq!(status("fast reaches 80% of the copy"), ClaimStatus::Holds);
    assert_eq!(status("every case is right"), ClaimStatus::Holds);
    assert_eq!(status("the CPU's time rises with n"), ClaimStatus::Holds);
    assert_eq!(status("fast's bandwidth falls with n"), ClaimStatus::Holds);
    let five = verdict(&verdicts, "fast beats the CPU by 5x");
    assert_eq!(five.cases.len(), 6, "each of fast's points has a CPU twin");
    assert!(
        five.evidence.contains("6 of 6 cases hold"),
        "{}",
        five.evidence
    );
}

#[test]
fn variants_fixed_apart_on_an_axis_are_compared_across_it() {
    // fast runs at 32 threads a block and naive at 1024 (as `params = { block = [..] }` makes
    // them): the claim still pairs each n and dtype, and only those.
    let (manifest, mut doc) = synthetic(time);
    for case in &mut doc.cases {
        let block = match case.variant.as_str() {
            "fast" => 32,
            "naive" => 1024,
            _ => continue,
        };
        case.params
            .insert("block".into(), kbench::vocab::ParamValue::Int(block));
    }
    let verdicts = judge_all(&manifest, &doc);
    let naive = verdict(&verdicts, "naive is as fast as fast");
    assert_eq!(naive.status, ClaimStatus::Refuted);
    assert_eq!(naive.cases.len(), 6, "{:?}", naive.evidence);
    // Axes both variants share a value of are still matched: one more fast case at block 1024
    // pairs with naive's, not with every naive case.
    let mut extra = doc
        .cases
        .iter()
        .find(|c| c.variant == "fast")
        .unwrap()
        .clone();
    extra
        .params
        .insert("block".into(), kbench::vocab::ParamValue::Int(1024));
    doc.cases.push(extra);
    let verdicts = judge_all(&manifest, &doc);
    assert_eq!(
        verdict(&verdicts, "naive is as fast as fast").cases.len(),
        1
    );
}

#[test]
fn accuracy_figures_of_cases_that_failed_their_check_are_shown_and_judged() {
    // fast's share within tolerance falls with n: 100%, then 90% and 50% (failed cases).
    let (manifest, mut doc) = synthetic(time);
    for case in doc.cases.iter_mut().filter(|c| c.variant == "fast") {
        let wrong = match case.params["n"] {
            kbench::vocab::ParamValue::Int(1_000_000) => 0,
            kbench::vocab::ParamValue::Int(2_000_000) => 10,
            _ => 50,
        };
        let accuracy = &mut case.outputs[0].accuracy;
        accuracy.elements = 100;
        accuracy.wrong_elements = wrong;
        accuracy.passed = wrong == 0;
        if wrong > 0 {
            case.status = CaseStatus::AccuracyFailed;
        }
    }
    let mut falls = manifest.claims[0].clone();
    falls.check = kbench::manifest::Check::Trend {
        a: "fast".into(),
        quantity: kbench::manifest::Quantity::ShareWithinTolerance,
        along: "n".into(),
        rising: false,
    };
    let verdict = kbench::claims::judge(&falls, &doc);
    assert_eq!(verdict.status, ClaimStatus::Holds, "{}", verdict.evidence);
    assert_eq!(verdict.cases.len(), 4, "two steps for each dtype");
    let mut rises = falls.clone();
    rises.check = kbench::manifest::Check::Trend {
        a: "fast".into(),
        quantity: kbench::manifest::Quantity::ShareWithinTolerance,
        along: "n".into(),
        rising: true,
    };
    assert_eq!(
        kbench::claims::judge(&rises, &doc).status,
        ClaimStatus::Refuted
    );
    // A table of the share shows the failed cases' figures; a table of times does not.
    let mut share_table = manifest.tables[0].clone();
    share_table.value = kbench::manifest::Quantity::ShareWithinTolerance;
    share_table.references.clear();
    let text = declared_tables::render(&share_table, &doc, TableStyle::Markdown, None);
    assert!(text.contains("90.0%") && text.contains("50.0%"), "{text}");
    let times = declared_tables::render(&manifest.tables[0], &doc, TableStyle::Markdown, None);
    assert!(times.contains("ACCURACY_FAILED"), "{times}");
}

#[test]
fn a_factor_beyond_the_evidence_is_refuted_and_one_within_the_noise_is_inconclusive() {
    // fast is exactly 25x the CPU: 30x is refuted; with the samples' spread, 25x is neither.
    let (manifest, doc) = synthetic(|variant, n, dtype| match variant {
        "fast" => Some(4.0 * n as f64 / 25e9),
        _ => time(variant, n, dtype),
    });
    let mut verdicts = judge_all(&manifest, &doc);
    assert_eq!(
        verdict(&verdicts, "fast beats the CPU by 20x").status,
        ClaimStatus::Holds
    );
    let mut thirty = manifest.claims[1].clone();
    thirty.check = kbench::manifest::Check::Faster {
        a: "fast".into(),
        b: "cpu".into(),
        by: 30.0,
    };
    let mut twenty_five = thirty.clone();
    twenty_five.check = kbench::manifest::Check::Faster {
        a: "fast".into(),
        b: "cpu".into(),
        by: 25.0,
    };
    verdicts = vec![
        kbench::claims::judge(&thirty, &doc),
        kbench::claims::judge(&twenty_five, &doc),
    ];
    assert_eq!(verdicts[0].status, ClaimStatus::Refuted);
    assert_eq!(verdicts[1].status, ClaimStatus::Inconclusive);
}

#[test]
fn cuda_claims_without_a_gpu_are_inconclusive_skipped_never_refuted() {
    let (manifest, doc) = synthetic(|variant, n, dtype| match variant {
        "cpu" => time(variant, n, dtype),
        _ => None,
    });
    for v in judge_all(&manifest, &doc) {
        if v.text == "the CPU's time rises with n" {
            assert_eq!(v.status, ClaimStatus::Holds);
            continue;
        }
        assert_eq!(v.status, ClaimStatus::Inconclusive, "{}", v.text);
        if v.kind != "passes" {
            assert!(v.skipped, "{}: {}", v.text, v.evidence);
            assert!(v.evidence.contains("skipped"), "{}", v.evidence);
        }
    }
}

#[test]
fn a_wrong_answer_refutes_a_passes_claim() {
    let (manifest, mut doc) = synthetic(time);
    doc.cases[4].status = CaseStatus::AccuracyFailed;
    doc.cases[4].reason = Some("wrong answer: `sum`: 1 of 1 elements outside tolerance".into());
    let verdicts = judge_all(&manifest, &doc);
    let passes = verdict(&verdicts, "every case is right");
    assert_eq!(passes.status, ClaimStatus::Refuted);
    assert!(
        passes.evidence.contains("outside tolerance"),
        "{}",
        passes.evidence
    );
}

#[test]
fn declared_tables_and_claims_render_as_expected() {
    let (manifest, mut doc) = synthetic(|variant, n, dtype| match (variant, n) {
        ("naive", 2_000_000) => None,
        _ => time(variant, n, dtype),
    });
    doc.claims = judge_all(&manifest, &doc);
    let mut out = String::new();
    for style in [TableStyle::Terminal, TableStyle::Markdown] {
        for table in &manifest.tables {
            out.push_str(&declared_tables::render(table, &doc, style, None));
            out.push('\n');
        }
        out.push_str(&declared_tables::render_claims(&doc.claims, style, None));
        out.push('\n');
    }
    for table in &manifest.tables {
        out.push_str(&declared_tables::render_csv(table, &doc).unwrap());
    }
    insta::assert_snapshot!(out);
}
