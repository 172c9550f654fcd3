//! The search spaces: a study's planned cases grouped into problem points (a variant at one
//! value of every axis not tuned) and, at each, the configurations to choose from (the tuned
//! axes' values that the plan keeps there, so the grid's `where` restrictions and a variant's
//! `params` hold). Each configuration is one planned case; its coordinates are the indices of
//! its values in each tuned axis's sorted values, which is what the strategies see.

use std::collections::BTreeMap;

use crate::manifest::Manifest;
use crate::plan::Case;
use crate::vocab::{describe_params, ParamValue, Params};

/// One configuration of a problem point: a planned case.
#[derive(Debug, Clone)]
pub struct Config {
    pub case: Case,
    /// The tuned axes' values (those the case has), by axis name.
    pub values: Params,
    /// The index of each tuned axis's value among that axis's values at this point.
    pub coords: Vec<usize>,
}

/// A problem point and its configurations, in plan order.
#[derive(Debug, Clone)]
pub struct Problem {
    pub variant: String,
    /// The axes not tuned, at this point.
    pub params: Params,
    pub configs: Vec<Config>,
    /// How many values each tuned axis takes here (the coordinates' ranges).
    pub axis_sizes: Vec<usize>,
}

impl Problem {
    /// `gpu n=1000 dtype=f32`: the problem point in one line.
    pub fn label(&self) -> String {
        let params = describe_params(&self.params);
        if params.is_empty() {
            self.variant.clone()
        } else {
            format!("{} {params}", self.variant)
        }
    }

    /// The strategies' view of the configurations.
    pub fn space(&self) -> Space {
        Space {
            coords: self.configs.iter().map(|c| c.coords.clone()).collect(),
            axis_sizes: self.axis_sizes.clone(),
        }
    }

    /// The configuration whose planned case has this index.
    pub fn config_of_case(&self, case_index: usize) -> Option<usize> {
        self.configs.iter().position(|c| c.case.index == case_index)
    }
}

/// What a strategy searches: each configuration as coordinates on a grid of `axis_sizes`.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub coords: Vec<Vec<usize>>,
    pub axis_sizes: Vec<usize>,
}

impl Space {
    pub fn len(&self) -> usize {
        self.coords.len()
    }

    pub fn is_empty(&self) -> bool {
        self.coords.is_empty()
    }

    /// The coordinates scaled to [0, 1] per axis (an axis of one value sits at 0).
    pub fn unit(&self, config: usize) -> Vec<f64> {
        (self.coords[config].iter().zip(&self.axis_sizes))
            .map(|(&c, &size)| match size {
                0 | 1 => 0.0,
                _ => c as f64 / (size - 1) as f64,
            })
            .collect()
    }

    /// The configurations one step from `config` along one axis (the grid's neighbours that
    /// the space holds).
    pub fn neighbours(&self, config: usize) -> Vec<usize> {
        let here = &self.coords[config];
        (0..self.len())
            .filter(|&other| {
                let there = &self.coords[other];
                let steps: usize = (here.iter().zip(there)).map(|(a, b)| a.abs_diff(*b)).sum();
                steps == 1
            })
            .collect()
    }
}

/// The plan's cases as problem points, in the order their first case is planned.
pub fn problems(manifest: &Manifest, cases: &[Case], tuned: &[String]) -> Vec<Problem> {
    let mut order: Vec<(usize, Params)> = Vec::new();
    let mut groups: BTreeMap<(usize, Params), Vec<(Case, Params)>> = BTreeMap::new();
    for case in cases {
        let mut rest = case.params.clone();
        let mut values = Params::new();
        for axis in tuned {
            if let Some(v) = rest.remove(axis) {
                values.insert(axis.clone(), v);
            }
        }
        let key = (case.variant, rest);
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push((case.clone(), values));
    }
    order
        .into_iter()
        .map(|key| {
            let members = groups.remove(&key).unwrap_or_default();
            problem(manifest, key, members, tuned)
        })
        .collect()
}

fn problem(
    manifest: &Manifest,
    (variant, params): (usize, Params),
    members: Vec<(Case, Params)>,
    tuned: &[String],
) -> Problem {
    // Each tuned axis's values at this point, sorted: the coordinates are indices into them.
    let axis_values: Vec<Vec<ParamValue>> = tuned
        .iter()
        .map(|axis| {
            let mut values: Vec<ParamValue> = (members.iter())
                .filter_map(|(_, v)| v.get(axis).cloned())
                .collect();
            values.sort();
            values.dedup();
            values
        })
        .collect();
    let configs = members
        .into_iter()
        .map(|(case, values)| {
            let coords = (tuned.iter().zip(&axis_values))
                .map(|(axis, all)| {
                    (values.get(axis))
                        .and_then(|v| all.iter().position(|a| a == v))
                        .unwrap_or(0)
                })
                .collect();
            Config {
                case,
                values,
                coords,
            }
        })
        .collect();
    Problem {
        variant: manifest.variants[variant].name.clone(),
        params,
        configs,
        axis_sizes: axis_values.iter().map(|v| v.len().max(1)).collect(),
    }
}
