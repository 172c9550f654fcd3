//! The plan: a validated manifest's grid and variants expanded into the list of cases to run.
//!
//! Grid points are filtered on the full grid first; each variant then sees the projection of
//! each point onto the axes that apply to its backend (a CPU variant has no `block`), without
//! duplicates, and with its own `params` replacing the grid's values. A point the variant's
//! implementation does not run at (`Algorithm::supports`: a TF32 kernel at float64) is left out
//! of that variant.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::algos::AxisKind;
use crate::grid::{grid_points, AxisValues};
use crate::manifest::{Manifest, ManifestError};
use crate::record::Variant;
use crate::vocab::{describe_params, ParamValue, Params};

/// The most bytes a case may need and still be planned: 2^57, the largest virtual address space
/// of any 64-bit machine (5-level paging). A case past it can run nowhere, so `check` refuses it
/// at its line; a case that merely exceeds this machine's memory is skipped at run time instead.
pub const MAX_CASE_BYTES: u64 = 1 << 57;

/// One unit of work: a variant at one grid point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Position in the plan; stable for a given manifest.
    pub index: usize,
    pub variant: usize,
    pub params: Params,
}

/// Why a manifest could not be planned.
#[derive(Debug)]
pub enum PlanError {
    /// A mistake only planning finds, at its line: a filter that divides by zero or overflows,
    /// a study or variant left with no case, a size no machine can hold.
    Manifest(ManifestError),
    /// Ctrl-C while planning.
    Interrupted,
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::Manifest(e) => e.fmt(f),
            PlanError::Interrupted => write!(f, "interrupted while planning"),
        }
    }
}

impl std::error::Error for PlanError {}

/// Expands a validated manifest into its cases: grid points outermost, variants innermost, so the
/// variants of one point run side by side.
pub fn expand(manifest: &Manifest) -> Result<Vec<Case>, ManifestError> {
    plan(manifest, &AtomicBool::new(false)).map_err(|e| match e {
        PlanError::Manifest(e) => e,
        PlanError::Interrupted => unreachable!("nothing sets a flag of our own"),
    })
}

/// `expand`, stopping with `PlanError::Interrupted` soon after `interrupted` is set.
pub fn plan(manifest: &Manifest, interrupted: &AtomicBool) -> Result<Vec<Case>, PlanError> {
    let mut per_variant: Vec<Vec<Params>> = Vec::new();
    for (v, variant) in manifest.variants.iter().enumerate() {
        per_variant.push(variant_points(manifest, v, variant, interrupted)?);
    }
    if per_variant.iter().all(Vec::is_empty) {
        let message = match &manifest.filter {
            Some(_) => "the filter holds at no grid point, so the study has no case to run",
            None => "no variant runs at any grid point, so the study has no case to run",
        };
        return Err(PlanError::Manifest(match manifest.spans.where_value {
            Some(_) => manifest.where_error(0, message.into()),
            None => manifest.error_at(manifest.spans.grid.clone(), "grid", message.into()),
        }));
    }
    if let Some(v) = per_variant.iter().position(Vec::is_empty) {
        let span = manifest.spans.variant_names.get(v).cloned().unwrap_or(0..0);
        return Err(PlanError::Manifest(manifest.error_at(
            span,
            &format!("variant[{v}].name"),
            format!(
                "variant `{}` runs at no grid point (the filter, its `params`, or what its implementation supports leave none): remove it or widen the grid",
                manifest.variants[v].name
            ),
        )));
    }
    // Interleave: for each point of the full grid order, every variant that has it.
    let mut cases = Vec::new();
    let longest = per_variant.iter().map(Vec::len).max().unwrap_or(0);
    for p in 0..longest {
        for (v, points) in per_variant.iter_mut().enumerate() {
            if let Some(point) = points.get_mut(p) {
                cases.push(Case {
                    index: cases.len(),
                    variant: v,
                    params: std::mem::take(point),
                });
            }
        }
    }
    Ok(cases)
}

/// The points one variant runs: its overrides applied, filtered, projected onto its axes,
/// deduplicated (with a hash set: linear in the grid's size).
fn variant_points(
    manifest: &Manifest,
    variant_index: usize,
    variant: &Variant,
    interrupted: &AtomicBool,
) -> Result<Vec<Params>, PlanError> {
    let axes: Vec<(String, AxisValues)> = manifest
        .axes
        .iter()
        .map(|(name, values)| {
            let values = match variant.params.get(name) {
                Some(own) => AxisValues(own.clone()),
                None => values.clone(),
            };
            (name.clone(), values)
        })
        .collect();
    let spec = manifest.algorithm.spec();
    let mut points = Vec::new();
    let mut seen = HashSet::new();
    for (k, point) in grid_points(&axes, &manifest.zip).into_iter().enumerate() {
        if k % 1024 == 0 && interrupted.load(Ordering::Relaxed) {
            return Err(PlanError::Interrupted);
        }
        if let Some(filter) = &manifest.filter {
            let holds = filter.matches(&point).map_err(|(offset, message)| {
                PlanError::Manifest(manifest.where_error(offset, message))
            })?;
            if !holds {
                continue;
            }
        }
        let projected: Params = point
            .into_iter()
            .filter(|(name, _)| {
                spec.axis(name)
                    .is_some_and(|a| a.applies_to(variant.backend))
            })
            .collect();
        if seen.contains(&projected) {
            continue;
        }
        // Parameters that do not bind are kept: the case then fails with the reason.
        if let Ok(bound) = manifest.algorithm.bind(&projected) {
            if !bound.supports(&variant.implementation) {
                continue;
            }
            // A file's size is read from the file: a results file's manifest was sized when
            // its run planned it, and its reader may be in any folder or on another machine.
            let bytes =
                (!manifest.files_recorded).then(|| bound.footprint_bytes(&variant.implementation));
            if let Some(bytes) = bytes.filter(|b| b.is_none_or(|b| b > MAX_CASE_BYTES)) {
                return Err(PlanError::Manifest(too_big(
                    manifest,
                    variant_index,
                    variant,
                    &projected,
                    bytes,
                )));
            }
        }
        seen.insert(projected.clone());
        points.push(projected);
    }
    Ok(points)
}

/// The error for a case no machine could hold, at the line of its largest size.
fn too_big(
    manifest: &Manifest,
    variant_index: usize,
    variant: &Variant,
    point: &Params,
    bytes: Option<u64>,
) -> ManifestError {
    let spec = manifest.algorithm.spec();
    let largest_size = point
        .iter()
        .filter(|(name, _)| spec.axis(name).is_some_and(|a| a.kind == AxisKind::Size))
        .max_by_key(|(_, value)| match value {
            ParamValue::Int(i) => *i,
            _ => 0,
        })
        .map(|(name, _)| name.as_str());
    let (span, key) = match largest_size {
        Some(axis) => manifest.axis_span(variant_index, axis),
        None => (manifest.spans.grid.clone(), "grid".to_string()),
    };
    let needs = match bytes {
        Some(b) => format!("{:.3e} bytes", b as f64),
        None => "more bytes than 64-bit arithmetic counts".to_string(),
    };
    manifest.error_at(
        span,
        &key,
        format!(
            "variant `{}` at {} needs {needs}, past the 2^57 bytes any 64-bit machine can address: the case could never run",
            variant.name,
            describe_params(point)
        ),
    )
}

/// `case 3 (seq n=100)`: a recorded case, as the refusals name it.
pub fn describe_recorded(case: &crate::record::CaseResult) -> String {
    format!(
        "case {} ({} {})",
        case.index,
        case.variant,
        describe_params(&case.params)
    )
}

/// Refuses a case of the results file at `path` that is not `plan`'s case at its index (the same
/// variant and parameters): the file was edited, or its manifest plans otherwise now.
pub fn check_recorded(
    manifest: &Manifest,
    plan: &[Case],
    case: &crate::record::CaseResult,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let planned = plan.get(case.index);
    if planned.is_none_or(|c| {
        manifest.variants[c.variant].name != case.variant || c.params != case.params
    }) {
        anyhow::bail!(
            "{}: {} is not in the plan of its own manifest; was the file edited?",
            path.display(),
            describe_recorded(case)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::ParamValue;
    use std::path::Path;

    fn manifest(grid: &str, variants: &str) -> Manifest {
        let text = format!(
            "[study]\nname = \"t\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\n{grid}\n{variants}"
        );
        crate::manifest::parse(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{e}"))
    }

    const GPU: &str = "[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n";
    const CPU: &str = "[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n";

    fn ints(cases: &[Case], axis: &str) -> Vec<i64> {
        cases
            .iter()
            .map(|c| match &c.params[axis] {
                ParamValue::Int(i) => *i,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn pow2_and_ranges_expand_inclusively() {
        let m = manifest("n = { pow2 = [3, 6] }", GPU);
        assert_eq!(ints(&expand(&m).unwrap(), "n"), [8, 16, 32, 64]);
        let m = manifest("n = { start = 10, stop = 30, step = 7 }", GPU);
        assert_eq!(ints(&expand(&m).unwrap(), "n"), [10, 17, 24]);
        let m = manifest("n = 5", GPU);
        assert_eq!(ints(&expand(&m).unwrap(), "n"), [5]);
    }

    #[test]
    fn the_product_runs_the_first_axis_slowest_and_variants_innermost() {
        let m = manifest(
            "n = [1, 2]\ndtype = [\"f32\", \"f64\"]",
            &format!("{CPU}{GPU}"),
        );
        let cases = expand(&m).unwrap();
        let got: Vec<(usize, i64, String)> = cases
            .iter()
            .map(|c| {
                (
                    c.variant,
                    ints(std::slice::from_ref(c), "n")[0],
                    c.params["dtype"].to_string(),
                )
            })
            .collect();
        let want = [
            (0, 1, "f32"),
            (1, 1, "f32"),
            (0, 1, "f64"),
            (1, 1, "f64"),
            (0, 2, "f32"),
            (1, 2, "f32"),
            (0, 2, "f64"),
            (1, 2, "f64"),
        ];
        assert_eq!(got, want.map(|(v, n, d)| (v, n, d.to_string())));
        assert_eq!(
            cases.iter().map(|c| c.index).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
    }

    #[test]
    fn zipped_axes_advance_together() {
        let m = manifest(
            "n = [100, 200, 300]\nblock = [32, 64, 128]\nzip = [[\"n\", \"block\"]]",
            GPU,
        );
        let cases = expand(&m).unwrap();
        assert_eq!(ints(&cases, "n"), [100, 200, 300]);
        assert_eq!(ints(&cases, "block"), [32, 64, 128]);
    }

    #[test]
    fn where_filters_the_grid() {
        let m = manifest("n = [16, 64, 256, 1000]\nblock = [32, 128]\nwhere = \"n >= block and n % 2 == 0 and not (n == 1000)\"", GPU);
        let cases = expand(&m).unwrap();
        let pairs: Vec<(i64, i64)> = ints(&cases, "n")
            .into_iter()
            .zip(ints(&cases, "block"))
            .collect();
        assert_eq!(pairs, [(64, 32), (256, 32), (256, 128)]);
        let m = manifest(
            "n = [1, 2]\ndtype = [\"f32\", \"i32\"]\nwhere = 'dtype != \"i32\" || n == 2'",
            GPU,
        );
        assert_eq!(expand(&m).unwrap().len(), 3);
    }

    #[test]
    fn cpu_variants_drop_gpu_axes_without_duplicates() {
        let m = manifest(
            "n = [10, 20]\nblock = [32, 64, 128]",
            &format!("{CPU}{GPU}"),
        );
        let cases = expand(&m).unwrap();
        let cpu: Vec<&Case> = cases.iter().filter(|c| c.variant == 0).collect();
        assert_eq!(cpu.len(), 2);
        assert!(cpu.iter().all(|c| !c.params.contains_key("block")));
        assert_eq!(cases.iter().filter(|c| c.variant == 1).count(), 6);
    }

    #[test]
    fn points_an_implementation_does_not_run_at_are_left_out_of_its_variant() {
        // corr_tf32 multiplies on TF32 tensor cores: float32 only.
        let text = "[study]\nname = \"t\"\nalgorithm = \"pearson_matrix\"\nseed = 1\n[grid]\n\
                    m = 4\nn = 8\ndtype = [\"f32\", \"f64\"]\n\
                    [[variant]]\nname = \"tf32\"\nbackend = \"cuda\"\nkernel = \"corr_tf32\"\n\
                    [[variant]]\nname = \"gemm\"\nbackend = \"cuda\"\nkernel = \"corr_gemm\"\n";
        let m = crate::manifest::parse(Path::new("t.toml"), text).unwrap_or_else(|e| panic!("{e}"));
        let cases = expand(&m).unwrap();
        let of = |v: usize| -> Vec<String> {
            cases
                .iter()
                .filter(|c| c.variant == v)
                .map(|c| c.params["dtype"].to_string())
                .collect()
        };
        assert_eq!(of(0), ["f32"]);
        assert_eq!(of(1), ["f32", "f64"]);
    }

    #[test]
    fn planning_stops_when_interrupted() {
        let m = manifest("n = { start = 1, stop = 5000 }", CPU);
        let interrupted = AtomicBool::new(true);
        assert!(matches!(
            plan(&m, &interrupted),
            Err(PlanError::Interrupted)
        ));
        assert_eq!(plan(&m, &AtomicBool::new(false)).unwrap().len(), 5000);
    }

    #[test]
    fn variant_params_override_the_grid() {
        let variants = format!("{GPU}params = {{ block = [1024] }}\n[[variant]]\nname = \"h\"\nbackend = \"cuda\"\nkernel = \"reduce_naive\"\n");
        let m = manifest("n = [10]\nblock = [32, 64]", &variants);
        let cases = expand(&m).unwrap();
        let blocks: Vec<(usize, i64)> = cases
            .iter()
            .map(|c| (c.variant, ints(std::slice::from_ref(c), "block")[0]))
            .collect();
        assert_eq!(blocks, [(0, 1024), (1, 32), (1, 64)]);
    }
}
