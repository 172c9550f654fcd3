//! The plan: a validated manifest's grid and variants expanded into the list of cases to run.
//!
//! Grid points are filtered on the full grid first; each variant then sees the projection of
//! each point onto the axes that apply to its backend (a CPU variant has no `block`), without
//! duplicates, and with its own `params` replacing the grid's values. A point the variant's
//! implementation does not run at (`Algorithm::supports`: a TF32 kernel at float64) is left out
//! of that variant.

use serde::{Deserialize, Serialize};

use crate::grid::{grid_points, AxisValues};
use crate::manifest::Manifest;
use crate::schema::Variant;
use crate::vocab::Params;

/// One unit of work: a variant at one grid point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Position in the plan; stable for a given manifest.
    pub index: usize,
    pub variant: usize,
    pub params: Params,
}

/// Expands a validated manifest into its cases: grid points outermost, variants innermost, so the
/// variants of one point run side by side.
pub fn expand(manifest: &Manifest) -> Vec<Case> {
    let mut cases = Vec::new();
    let per_variant: Vec<Vec<Params>> = manifest
        .variants
        .iter()
        .map(|v| variant_points(manifest, v))
        .collect();
    // Interleave: for each point of the full grid order, every variant that has it.
    let mut order: Vec<(usize, usize)> = Vec::new();
    let longest = per_variant.iter().map(Vec::len).max().unwrap_or(0);
    for p in 0..longest {
        for (v, points) in per_variant.iter().enumerate() {
            if p < points.len() {
                order.push((v, p));
            }
        }
    }
    for (v, p) in order {
        cases.push(Case {
            index: cases.len(),
            variant: v,
            params: per_variant[v][p].clone(),
        });
    }
    cases
}

/// The points one variant runs: its overrides applied, filtered, projected onto its axes, deduplicated.
fn variant_points(manifest: &Manifest, variant: &Variant) -> Vec<Params> {
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
    let mut seen = std::collections::HashSet::new();
    for point in grid_points(&axes, &manifest.zip) {
        if let Some(filter) = &manifest.filter {
            if !filter.matches(&point) {
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
        // Parameters that do not bind are kept: the case then fails with the reason.
        let supported = manifest
            .algorithm
            .bind(&projected)
            .map_or(true, |bound| bound.supports(&variant.implementation));
        if supported && seen.insert(projected.clone()) {
            points.push(projected);
        }
    }
    points
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
        assert_eq!(ints(&expand(&m), "n"), [8, 16, 32, 64]);
        let m = manifest("n = { start = 10, stop = 30, step = 7 }", GPU);
        assert_eq!(ints(&expand(&m), "n"), [10, 17, 24]);
        let m = manifest("n = 5", GPU);
        assert_eq!(ints(&expand(&m), "n"), [5]);
    }

    #[test]
    fn the_product_runs_the_first_axis_slowest_and_variants_innermost() {
        let m = manifest(
            "n = [1, 2]\ndtype = [\"f32\", \"f64\"]",
            &format!("{CPU}{GPU}"),
        );
        let cases = expand(&m);
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
        let cases = expand(&m);
        assert_eq!(ints(&cases, "n"), [100, 200, 300]);
        assert_eq!(ints(&cases, "block"), [32, 64, 128]);
    }

    #[test]
    fn where_filters_the_grid() {
        let m = manifest("n = [16, 64, 256, 1000]\nblock = [32, 128]\nwhere = \"n >= block and n % 2 == 0 and not (n == 1000)\"", GPU);
        let cases = expand(&m);
        let pairs: Vec<(i64, i64)> = ints(&cases, "n")
            .into_iter()
            .zip(ints(&cases, "block"))
            .collect();
        assert_eq!(pairs, [(64, 32), (256, 32), (256, 128)]);
        let m = manifest(
            "n = [1, 2]\ndtype = [\"f32\", \"i32\"]\nwhere = 'dtype != \"i32\" || n == 2'",
            GPU,
        );
        assert_eq!(expand(&m).len(), 3);
    }

    #[test]
    fn cpu_variants_drop_gpu_axes_without_duplicates() {
        let m = manifest(
            "n = [10, 20]\nblock = [32, 64, 128]",
            &format!("{CPU}{GPU}"),
        );
        let cases = expand(&m);
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
        let cases = expand(&m);
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
    fn variant_params_override_the_grid() {
        let variants = format!("{GPU}params = {{ block = [1024] }}\n[[variant]]\nname = \"h\"\nbackend = \"cuda\"\nkernel = \"reduce_naive\"\n");
        let m = manifest("n = [10]\nblock = [32, 64]", &variants);
        let cases = expand(&m);
        let blocks: Vec<(usize, i64)> = cases
            .iter()
            .map(|c| (c.variant, ints(std::slice::from_ref(c), "block")[0]))
            .collect();
        assert_eq!(blocks, [(0, 1024), (1, 32), (1, 64)]);
    }
}
