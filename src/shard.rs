//! Many hosts: `kbench run --shard K/N` runs a deterministic part of a study's plan, and
//! `kbench merge` joins the parts' results files into one.
//!
//! Each case has a stable id, a 64-bit FNV-1a hash of the study's name, the variant's name and
//! the case's parameters (not its place in the plan), mixed by a finalizer; the plan's cases,
//! in the order of their ids, are dealt to shards 1..N in turn. Every host computes the same
//! split of the same plan, and each shard gets within one case of the N-th part (an id modulo
//! N, as files written before this split record, can leave a shard of a small grid empty).
//! Shards are numbered from 1, as `sbatch --array=1-N` numbers the tasks.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::manifest::Manifest;
use crate::plan::{self, Case};
use crate::record::{DeviceKey, MergedShard, ResultsDoc, ShardRecord, ShardSplit};
use crate::vocab::{describe_params, Params};

/// The case's stable id: the same on every host, whatever the case's place in the plan.
pub fn case_id(study: &str, variant: &str, params: &Params) -> u64 {
    let mut hash = fnv::FnvHasher::default();
    for part in [study, variant, &describe_params(params)] {
        hash.write(part.as_bytes());
        // A separator no name or parameter holds, so ("ab", "c") and ("a", "bc") differ.
        hash.write(&[0]);
    }
    hash.finish()
}

fn id_of(manifest: &Manifest, case: &Case) -> u64 {
    case_id(
        &manifest.study.name,
        &manifest.variants[case.variant].name,
        &case.params,
    )
}

/// MurmurHash3's 64-bit finalizer: every bit of the result depends on every bit of `h`.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The cases of `shard` (all of them for None), in plan order. `cases` is the whole plan: the
/// balanced split deals the plan's cases, in the order of their mixed ids, to the shards in
/// turn, so every shard of N gets within one case of the plan's N-th part.
pub fn select(manifest: &Manifest, cases: Vec<Case>, shard: Option<ShardRecord>) -> Vec<Case> {
    let Some(shard) = shard else {
        return cases;
    };
    let (count, wanted) = (u64::from(shard.count), u64::from(shard.index - 1));
    let shard_of: HashMap<usize, u64> = match shard.split {
        ShardSplit::Fnv1a => (cases.iter())
            .map(|c| (c.index, id_of(manifest, c) % count))
            .collect(),
        ShardSplit::Balanced => {
            let mut ranked: Vec<(u64, usize)> = (cases.iter())
                .map(|c| (fmix64(id_of(manifest, c)), c.index))
                .collect();
            ranked.sort_unstable();
            (ranked.iter().enumerate())
                .map(|(rank, (_, index))| (*index, rank as u64 % count))
                .collect()
        }
    };
    cases
        .into_iter()
        .filter(|c| shard_of[&c.index] == wanted)
        .collect()
}

/// A case's name as `kbench compare` and the results show it: the variant and its parameters,
/// `fast block=256 dtype=f32 n=1000`. `kbench run --case NAME` runs the cases so named.
pub fn case_name(manifest: &Manifest, case: &Case) -> String {
    format!(
        "{} {}",
        manifest.variants[case.variant].name,
        describe_params(&case.params)
    )
}

/// The cases named in `names` (all of them where `names` is empty), in plan order.
pub fn select_named(manifest: &Manifest, cases: Vec<Case>, names: &[String]) -> Vec<Case> {
    if names.is_empty() {
        return cases;
    }
    cases
        .into_iter()
        .filter(|c| names.contains(&case_name(manifest, c)))
        .collect()
}

/// Refuses a `--case` name that no planned case of any of the studies has, with a name the plan
/// does have, to show the form.
pub fn check_named(studies: &[(&Manifest, &[Case])], names: &[String]) -> Result<()> {
    for name in names {
        let known = studies
            .iter()
            .any(|(m, cases)| cases.iter().any(|c| case_name(m, c) == *name));
        if known {
            continue;
        }
        let example = studies
            .iter()
            .find_map(|(m, cases)| cases.first().map(|c| case_name(m, c)))
            .unwrap_or_default();
        bail!(
            "--case `{name}`: no planned case has that name; a case is named by its variant and \
             parameters as `kbench compare` shows them, e.g. `{example}`"
        );
    }
    Ok(())
}

/// `--shard K/N`: K from 1 to N.
pub fn parse_shard(text: &str) -> Result<ShardRecord, String> {
    let expected = "expected K/N with 1 <= K <= N (shards are numbered from 1), e.g. 2/4";
    let (k, n) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}`: {expected}"))?;
    let number = |s: &str| s.trim().parse::<u32>().ok();
    match (number(k), number(n)) {
        (Some(index), Some(count)) => {
            let shard = ShardRecord {
                index,
                count,
                split: ShardSplit::Balanced,
            };
            shard.check().map_err(|why| format!("`{text}`: {why}"))?;
            Ok(shard)
        }
        (_, Some(0)) => Err(format!("`{text}`: N must be at least 1")),
        _ => Err(format!("`{text}`: {expected}")),
    }
}

/// A merged results file, and the planned cases none of the inputs holds.
pub struct Merged {
    pub doc: ResultsDoc,
    pub manifest: Manifest,
    /// `variant params` of each missing case, in plan order.
    pub missing: Vec<String>,
}

/// Joins the results files of one study's shards (or any runs of disjoint parts of its plan)
/// into one record of the whole plan. Refuses files of different manifests, measure settings or
/// kbench builds, and a case held by two files.
pub fn merge(inputs: &[(PathBuf, ResultsDoc)]) -> Result<Merged> {
    let Some((first_path, first)) = inputs.first() else {
        bail!("nothing to merge: give the shards' results files")
    };
    for (path, doc) in &inputs[1..] {
        let differ = |what: &str, a: &str, b: &str| -> Result<()> {
            bail!(
                "{} and {} {what} ({a} vs {b}): they are not shards of one run; merge only the \
                 files of one `kbench run --shard`/`kbench slurm` submission",
                first_path.display(),
                path.display()
            )
        };
        if doc.study.name != first.study.name {
            differ("hold different studies", &first.study.name, &doc.study.name)?;
        }
        if doc.manifest.toml != first.manifest.toml {
            differ(
                "were run from different manifests",
                &format!("{} as recorded in the first", first.manifest.path),
                &format!("{} as recorded in the second", doc.manifest.path),
            )?;
        }
        let version = |d: &ResultsDoc| {
            format!(
                "kbench {} ({})",
                d.environment.kbench_version, d.environment.git_revision
            )
        };
        if version(doc) != version(first) {
            differ(
                "were written by different kbench versions",
                &version(first),
                &version(doc),
            )?;
        }
        if doc.manifest.measure != first.manifest.measure {
            differ(
                "were measured with different settings (command-line overrides)",
                &format!("{:?}", first.manifest.measure),
                &format!("{:?}", doc.manifest.measure),
            )?;
        }
    }
    let mut manifest = crate::manifest::parse_recorded(first, first_path)?;
    manifest.measure = first.manifest.measure.clone();
    let plan = plan::expand(&manifest)?;
    let mut held: HashMap<usize, &Path> = HashMap::new();
    let mut cases = Vec::new();
    let mut devices: Vec<crate::record::DeviceFingerprint> = Vec::new();
    let mut merged_from = Vec::new();
    for (path, doc) in inputs {
        for case in &doc.cases {
            plan::check_recorded(&manifest, &plan, case, path)?;
            if let Some(other) = held.insert(case.index, path) {
                bail!(
                    "{} and {} both hold {}: the shards overlap (the same shard run twice, or \
                     files of two submissions); merge one file per shard",
                    other.display(),
                    path.display(),
                    plan::describe_recorded(case)
                );
            }
            let mut case = case.clone();
            // The merged file's `environment.host` is the first file's: each GPU names its own.
            if let Some(d) = case.device.as_mut().filter(|d| d.host.is_empty()) {
                d.host = doc.environment.host.clone();
            }
            cases.push(case);
        }
        let env = &doc.environment;
        // Identical nodes have the same bus ids: a GPU is its host's and bus id's.
        for d in env.all_devices() {
            if !devices.iter().any(|k| k.key("") == d.key("")) {
                devices.push(d);
            }
        }
        merged_from.push(MergedShard {
            path: path.display().to_string(),
            host: env.host.clone(),
            shard: doc.shard,
            started_at: doc.started_at.clone(),
            cases: doc.cases.len(),
        });
    }
    cases.sort_by_key(|c| c.index);
    let missing: Vec<String> = plan
        .iter()
        .filter(|c| !held.contains_key(&c.index))
        .map(|c| {
            format!(
                "{} {}",
                manifest.variants[c.variant].name,
                describe_params(&c.params)
            )
        })
        .collect();
    let mut environment = first.environment.clone();
    environment.command_line = std::env::args().collect();
    environment.device = devices.first().cloned();
    environment.devices = devices;
    environment.gpu_unavailable = inputs
        .iter()
        .find_map(|(_, d)| d.environment.gpu_unavailable.clone());
    let complete = missing.is_empty();
    let started_at = inputs
        .iter()
        .map(|(_, d)| d.started_at.clone())
        .min()
        .unwrap_or_default();
    let finished_at = complete
        .then(|| {
            inputs
                .iter()
                .filter_map(|(_, d)| d.finished_at.clone())
                .max()
        })
        .flatten();
    let doc = ResultsDoc {
        schema_version: first.schema_version,
        study: first.study.clone(),
        manifest: first.manifest.clone(),
        environment,
        started_at,
        resumed_at: Vec::new(),
        finished_at,
        complete,
        planned_cases: plan.len(),
        cases,
        claims: Vec::new(),
        shard: None,
        merged_from,
    };
    Ok(Merged {
        doc,
        manifest,
        missing,
    })
}

/// `kbench merge`: reads `inputs`, merges them (see `merge`), judges the claims again and
/// writes the result to `output`, a new file: never one that exists (an input included).
pub fn merge_files(inputs: &[PathBuf], output: &Path) -> Result<Merged> {
    for input in inputs {
        let same = |a: &Path, b: &Path| {
            a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
        };
        if same(input, output) {
            bail!(
                "-o {}: that is one of the files to merge; write the merged file elsewhere",
                output.display()
            );
        }
    }
    if output.exists() {
        bail!(
            "-o {}: the file exists; kbench never overwrites results: choose a new name",
            output.display()
        );
    }
    let mut docs = Vec::new();
    for input in inputs {
        if docs.iter().any(|(p, _): &(PathBuf, ResultsDoc)| p == input) {
            bail!("{} is given twice", input.display());
        }
        docs.push((input.clone(), crate::results::load_results(input)?));
    }
    let mut merged = merge(&docs)?;
    merged.doc.claims = crate::claims::judge_all(&merged.manifest, &merged.doc);
    // Reserved first, so a file another process creates meanwhile is not overwritten either.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(output)
        .map_err(|e| anyhow::anyhow!("-o {}: cannot create it: {e}", output.display()))?;
    if let Err(e) = crate::results::write_json_atomically(output, &merged.doc) {
        // The empty reservation would make the next merge refuse `-o` as existing.
        let _ = std::fs::remove_file(output);
        return Err(e);
    }
    Ok(merged)
}

/// How many of a file's cases ran on each GPU, by host and PCI bus id (CUDA cases only).
pub fn cases_per_device(doc: &ResultsDoc) -> BTreeMap<DeviceKey, usize> {
    let mut counts = BTreeMap::new();
    for c in &doc.cases {
        if let Some(d) = &c.device {
            *counts.entry(d.key(&doc.environment.host)).or_insert(0) += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        let text = "[study]\nname = \"t\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\n\
                    n = [3, 5, 7, 100, 1000, 4096, 65536]\n\
                    [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
                    [[variant]]\nname = \"pw\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n";
        crate::manifest::parse(Path::new("t.toml"), text).unwrap()
    }

    #[test]
    fn shards_partition_the_plan_for_every_count_up_to_seven() {
        let m = manifest();
        let cases = plan::expand(&m).unwrap();
        assert_eq!(cases.len(), 14);
        for count in 1..=7 {
            let mut seen = vec![0; cases.len()];
            for index in 1..=count {
                let shard = ShardRecord {
                    index,
                    count,
                    split: ShardSplit::Balanced,
                };
                for c in select(&m, cases.clone(), Some(shard)) {
                    seen[c.index] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "N = {count}: {seen:?}");
        }
    }

    #[test]
    fn a_case_id_rests_on_names_and_parameters_not_the_plan_index() {
        let m = manifest();
        let cases = plan::expand(&m).unwrap();
        let c = &cases[3];
        let id = case_id("t", &m.variants[c.variant].name, &c.params);
        assert_eq!(id, case_id("t", &m.variants[c.variant].name, &c.params));
        assert_ne!(id, case_id("u", &m.variants[c.variant].name, &c.params));
        // Pinned (FNV-1a 64 of "ab\0c\0\0"): the split must be the same on every host and build.
        assert_eq!(
            case_id("ab", "c", &Params::new()),
            0x9ff2_ba6a_c462_ad7f_u64
        );
        assert_ne!(
            case_id("ab", "c", &Params::new()),
            case_id("a", "bc", &Params::new())
        );
    }

    /// Every shard of N gets within one case of the N-th part of the plan. The ids modulo N
    /// (files written before) left shard 1/2 of `n = [12, 21]` empty: both names have the same
    /// bytes, so the same parity, so the same low bit.
    #[test]
    fn every_shard_of_a_small_grid_gets_its_part() {
        for grid in [
            "12, 21",
            "10, 20, 30",
            "128, 256, 512, 1024",
            "3, 5, 7, 11, 13",
        ] {
            let text = format!(
                "[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [{grid}]\n\
                 [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n"
            );
            let m = crate::manifest::parse(Path::new("t.toml"), &text).unwrap();
            let cases = plan::expand(&m).unwrap();
            for count in 1..=cases.len() as u32 {
                let sizes: Vec<usize> = (1..=count)
                    .map(|index| {
                        let shard = ShardRecord {
                            index,
                            count,
                            split: ShardSplit::Balanced,
                        };
                        select(&m, cases.clone(), Some(shard)).len()
                    })
                    .collect();
                let (least, most) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(
                    most - least <= 1,
                    "n = [{grid}] in {count} shards: {sizes:?}"
                );
            }
        }
        let text =
            "[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [12, 21]\n\
                    [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n";
        let m = crate::manifest::parse(Path::new("t.toml"), text).unwrap();
        let cases = plan::expand(&m).unwrap();
        let legacy = |index| ShardRecord {
            index,
            count: 2,
            split: ShardSplit::Fnv1a,
        };
        let sizes = [1, 2].map(|k| select(&m, cases.clone(), Some(legacy(k))).len());
        assert!(sizes.contains(&0), "the legacy split: {sizes:?}");
    }

    #[test]
    fn shard_arguments_are_checked() {
        let shard = |index, count| ShardRecord {
            index,
            count,
            split: ShardSplit::Balanced,
        };
        assert_eq!(parse_shard("2/4"), Ok(shard(2, 4)));
        assert_eq!(parse_shard("1/1"), Ok(shard(1, 1)));
        assert!(parse_shard("0/4").unwrap_err().contains("numbered from 1"));
        assert!(parse_shard("5/4").unwrap_err().contains("does not exist"));
        assert!(parse_shard("1/0").unwrap_err().contains("at least 1"));
        for junk in ["", "2", "a/b", "2/4/1", "-1/4", "2.0/4"] {
            assert!(parse_shard(junk).is_err(), "{junk}");
        }
    }
}
