//! A manifest's `[[table]]` and `[[claim]]` sections: the published tables a study reproduces
//! (kbench's figures beside the report's) and the report's conclusions as checkable claims.
//! Parsed and validated here, against the study's variants and axes; judged in `claims` and
//! drawn in `report::declared_tables`.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::json_schema;

use super::{ManifestError, Validator};
use crate::algos::Spec;
use crate::grid::{param_from_toml, AxisValues};
use crate::record::Variant;
use crate::vocab::{Backend, ParamValue, Params};

/// What a table's rows or columns run over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dimension {
    Variant,
    Axis(String),
}

impl Dimension {
    /// The case's value along this dimension, as text (a variant's name, or an axis value).
    pub fn of(&self, variant: &str, params: &Params) -> Option<String> {
        match self {
            Dimension::Variant => Some(variant.to_string()),
            Dimension::Axis(axis) => params.get(axis).map(|v| v.to_string()),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Dimension::Variant => "variant",
            Dimension::Axis(axis) => axis,
        }
    }
}

/// A number a table shows or a trend claim follows, for each case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    Median,
    Mean,
    Min,
    GbytesPerS,
    GflopsPerS,
    PercentOfPeak,
    Speedup,
    ShareWithinTolerance,
    MaxRelErr,
}

impl Quantity {
    pub const NAMES: &'static [&'static str] = &[
        "median",
        "mean",
        "min",
        "gbytes_per_s",
        "gflops_per_s",
        "percent_of_peak",
        "speedup",
        "share_within_tolerance",
        "max_rel_err",
    ];
    const ALL: [Quantity; 9] = [
        Quantity::Median,
        Quantity::Mean,
        Quantity::Min,
        Quantity::GbytesPerS,
        Quantity::GflopsPerS,
        Quantity::PercentOfPeak,
        Quantity::Speedup,
        Quantity::ShareWithinTolerance,
        Quantity::MaxRelErr,
    ];

    pub fn parse(name: &str) -> Option<Quantity> {
        Quantity::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Quantity::ALL[i])
    }

    pub fn name(self) -> &'static str {
        Quantity::NAMES[Quantity::ALL
            .iter()
            .position(|q| *q == self)
            .expect("listed")]
    }

    /// Whether the quantity judges the answer, not the time: a case that failed its accuracy
    /// check still has it (the share within tolerance is the point of a float-vs-double table).
    pub fn is_accuracy(self) -> bool {
        matches!(self, Quantity::ShareWithinTolerance | Quantity::MaxRelErr)
    }

    /// Whether larger is better (throughput, speedup) rather than smaller (time, error).
    pub fn larger_is_better(self) -> bool {
        matches!(
            self,
            Quantity::GbytesPerS
                | Quantity::GflopsPerS
                | Quantity::PercentOfPeak
                | Quantity::Speedup
                | Quantity::ShareWithinTolerance
        )
    }

    /// The units a published figure of this quantity may be given in.
    fn units(self) -> &'static [Unit] {
        match self {
            Quantity::Median | Quantity::Mean | Quantity::Min => {
                &[Unit::S, Unit::Ms, Unit::Us, Unit::Ns]
            }
            Quantity::GbytesPerS => &[Unit::GbPerS],
            Quantity::GflopsPerS => &[Unit::GflopPerS],
            Quantity::PercentOfPeak | Quantity::ShareWithinTolerance => &[Unit::Percent],
            Quantity::Speedup => &[Unit::Times],
            Quantity::MaxRelErr => &[Unit::Plain],
        }
    }
}

/// The unit of a published figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    S,
    Ms,
    Us,
    Ns,
    GbPerS,
    GflopPerS,
    Percent,
    Times,
    Plain,
}

impl Unit {
    const ALL: [(Unit, &'static str); 9] = [
        (Unit::S, "s"),
        (Unit::Ms, "ms"),
        (Unit::Us, "us"),
        (Unit::Ns, "ns"),
        (Unit::GbPerS, "GB/s"),
        (Unit::GflopPerS, "GFLOP/s"),
        (Unit::Percent, "%"),
        (Unit::Times, "x"),
        (Unit::Plain, "1"),
    ];

    /// The units' names, as manifests write them.
    pub fn names() -> Vec<&'static str> {
        Unit::ALL.iter().map(|(_, name)| *name).collect()
    }

    fn parse(text: &str) -> Option<Unit> {
        Unit::ALL.iter().find(|(_, n)| *n == text).map(|(u, _)| *u)
    }

    /// A figure in this unit, in the unit kbench computes the quantity in (seconds, GB/s, ...).
    pub fn to_base(self, value: f64) -> f64 {
        match self {
            Unit::Ms => value * 1e-3,
            Unit::Us => value * 1e-6,
            Unit::Ns => value * 1e-9,
            _ => value,
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = Unit::ALL.iter().find(|(u, _)| u == self).expect("listed").1;
        f.write_str(name)
    }
}

/// Which cases a table or claim looks at: for each named axis, the values kept. A case without
/// the axis (a CPU variant has no `block`) is not filtered by it.
pub type Select = BTreeMap<String, Vec<ParamValue>>;

pub fn selected(select: &Select, params: &Params) -> bool {
    select
        .iter()
        .all(|(axis, values)| params.get(axis).is_none_or(|v| values.contains(v)))
}

/// A table to print after a run: kbench's figures, and the published ones beside them.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSpec {
    pub title: String,
    pub rows: Dimension,
    pub columns: Dimension,
    pub value: Quantity,
    /// The variants shown, in this order (all, in the manifest's order, if not given).
    pub variants: Vec<String>,
    pub select: Select,
    /// For `speedup`: the variant whose median is divided by each case's.
    pub baseline: Option<String>,
    pub references: Vec<ReferenceRow>,
}

/// One row of published figures, keyed by the table's column values.
#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceRow {
    pub label: String,
    pub source: String,
    pub unit: Unit,
    pub values: BTreeMap<String, f64>,
}

/// A conclusion of a report, and how to check it against a run.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimSpec {
    /// The report's sentence, quoted.
    pub text: String,
    pub source: String,
    pub check: Check,
    pub select: Select,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// `a` is at least `by` times faster than `b` at every selected grid point.
    Faster { a: String, b: String, by: f64 },
    /// `a` moves its bytes at `share` of its measured peak (read, write or copy, as its
    /// traffic) or more.
    ReachesPeak { a: String, share: f64 },
    /// Every selected case of these variants passes its accuracy check.
    Passes { variants: Vec<String> },
    /// `quantity` of `a` rises (or falls) from each value of `along` to the next.
    Trend {
        a: String,
        quantity: Quantity,
        along: String,
        rising: bool,
    },
}

impl Check {
    pub fn kind(&self) -> &'static str {
        match self {
            Check::Faster { .. } => "faster",
            Check::ReachesPeak { .. } => "reaches_peak",
            Check::Passes { .. } => "passes",
            Check::Trend { rising: true, .. } => "rises",
            Check::Trend { rising: false, .. } => "falls",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTable {
    #[schemars(with = "String")]
    title: Spanned<String>,
    /// What the rows run over: `variant` or an axis.
    #[schemars(schema_with = "json_schema::dimension")]
    rows: Spanned<String>,
    /// What the columns run over: `variant` or an axis.
    #[schemars(schema_with = "json_schema::dimension")]
    columns: Spanned<String>,
    /// The figure each cell shows.
    #[schemars(schema_with = "quantity_schema")]
    value: Spanned<String>,
    /// The variants shown, in this order (all if not given).
    #[schemars(with = "Option<Vec<String>>")]
    variants: Option<Spanned<Vec<String>>>,
    /// For each axis, the values kept.
    #[serde(default)]
    #[schemars(schema_with = "json_schema::select")]
    select: Option<Spanned<BTreeMap<String, toml::Value>>>,
    /// For `speedup`: the variant the others are compared with.
    #[schemars(with = "Option<String>")]
    baseline: Option<Spanned<String>>,
    /// Published figures, shown beside kbench's.
    #[serde(rename = "reference", default)]
    #[schemars(with = "Vec<RawReference>")]
    references: Vec<Spanned<RawReference>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReference {
    #[schemars(with = "String")]
    label: Spanned<String>,
    #[schemars(with = "String")]
    source: Spanned<String>,
    /// The unit of the published figures.
    #[schemars(schema_with = "unit_schema")]
    unit: Spanned<String>,
    /// The figures, keyed by the table's column values.
    #[schemars(with = "BTreeMap<String, f64>")]
    values: Spanned<BTreeMap<String, f64>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClaim {
    /// The report's sentence, quoted.
    #[schemars(with = "String")]
    text: Spanned<String>,
    #[schemars(with = "String")]
    source: Spanned<String>,
    /// faster (a than b), reaches_peak (a), passes (variants), rises or falls (quantity of a along an axis).
    #[schemars(schema_with = "claim_kind_schema")]
    kind: Spanned<String>,
    #[schemars(with = "Option<String>")]
    a: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    b: Option<Spanned<String>>,
    #[schemars(with = "Option<Vec<String>>")]
    variants: Option<Spanned<Vec<String>>>,
    /// For `faster`: at least this many times faster.
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0))]
    by: Option<Spanned<f64>>,
    /// For `reaches_peak`: the share of the measured peak matching the case's traffic (read,
    /// write or copy; 0.8 = 80%).
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0))]
    share: Option<Spanned<f64>>,
    #[serde(default)]
    #[schemars(schema_with = "quantity_schema")]
    quantity: Option<Spanned<String>>,
    /// For `rises` and `falls`: the axis followed.
    #[serde(default)]
    #[schemars(schema_with = "json_schema::axis_name")]
    along: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(schema_with = "json_schema::select")]
    select: Option<Spanned<BTreeMap<String, toml::Value>>>,
}

pub(super) const CLAIM_KINDS: &[&str] = &["faster", "reaches_peak", "passes", "rises", "falls"];

/// What the study has, for checking that tables and claims name only that.
pub(super) struct StudyShape<'a> {
    pub spec: &'a Spec,
    pub axes: &'a [(String, AxisValues)],
    pub variants: &'a [Variant],
}

impl StudyShape<'_> {
    fn variant(
        &self,
        name: &Spanned<String>,
        key: &str,
        v: &Validator,
    ) -> Result<(), ManifestError> {
        if self.variants.iter().any(|x| &x.name == name.get_ref()) {
            return Ok(());
        }
        Err(v.error(
            name.span(),
            key,
            format!(
                "`{}` is not a variant of this study; its variants: {}",
                name.get_ref(),
                self.variant_names()
            ),
        ))
    }

    /// A list of variants (`variants = [...]`): each one of the study's, none twice, and not
    /// empty (a table or claim over no variant can never hold data).
    fn variant_list(
        &self,
        list: &Spanned<Vec<String>>,
        key: &str,
        v: &Validator,
    ) -> Result<Vec<String>, ManifestError> {
        if list.get_ref().is_empty() {
            return Err(v.error(
                list.span(),
                key,
                format!(
                    "`variants = []` names no variant, so nothing could ever be shown or checked; \
                     name some of: {}",
                    self.variant_names()
                ),
            ));
        }
        for (k, name) in list.get_ref().iter().enumerate() {
            let spanned = Spanned::new(list.span(), name.clone());
            self.variant(&spanned, key, v)?;
            if list.get_ref()[..k].contains(name) {
                return Err(v.error(
                    list.span(),
                    key,
                    format!("`{name}` is listed twice; name each variant once"),
                ));
            }
        }
        Ok(list.get_ref().clone())
    }

    /// The backends of the named variants.
    fn backends<'n>(&self, names: &'n [String]) -> impl Iterator<Item = Backend> + use<'_, 'n> {
        names.iter().filter_map(|name| {
            self.variants
                .iter()
                .find(|v| &v.name == name)
                .map(|v| v.backend)
        })
    }

    /// Refuses a dimension no shown variant has (rows by `block` over CPU variants): the
    /// table would have no row or column.
    fn dimension_applies(
        &self,
        dimension: &Dimension,
        span: std::ops::Range<usize>,
        variants: &[String],
        key: &str,
        v: &Validator,
    ) -> Result<(), ManifestError> {
        let Dimension::Axis(axis) = dimension else {
            return Ok(());
        };
        let Some(def) = self.spec.axis(axis) else {
            return Ok(());
        };
        if self.backends(variants).any(|b| def.applies_to(b)) {
            return Ok(());
        }
        Err(v.error(
            span,
            key,
            format!(
                "no variant shown has the axis `{axis}` (it is the {} variants' only), so the \
                 table could never hold data; show such a variant or run over another axis",
                def.only_for.map_or("some".to_string(), |b| b.to_string())
            ),
        ))
    }

    fn variant_names(&self) -> String {
        self.variants
            .iter()
            .map(|x| x.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Every value the axis takes anywhere in the study (grid and variant overrides).
    fn axis_values(&self, axis: &str) -> Option<Vec<ParamValue>> {
        let (_, grid) = self.axes.iter().find(|(a, _)| a == axis)?;
        let mut values = grid.0.clone();
        for variant in self.variants {
            values.extend(variant.params.get(axis).into_iter().flatten().cloned());
        }
        values.sort();
        values.dedup();
        Some(values)
    }

    fn dimension(
        &self,
        name: &Spanned<String>,
        key: &str,
        v: &Validator,
    ) -> Result<Dimension, ManifestError> {
        if name.get_ref() == "variant" {
            return Ok(Dimension::Variant);
        }
        self.axis_name(name, key, v)?;
        Ok(Dimension::Axis(name.get_ref().clone()))
    }

    fn axis_name(
        &self,
        name: &Spanned<String>,
        key: &str,
        v: &Validator,
    ) -> Result<(), ManifestError> {
        if self.spec.axis(name.get_ref()).is_some() {
            return Ok(());
        }
        Err(v.error(
            name.span(),
            key,
            format!(
                "`{}` is neither `variant` nor an axis of `{}`; its axes: {}",
                name.get_ref(),
                self.spec.name,
                self.spec.axis_names().join(", ")
            ),
        ))
    }

    fn select(
        &self,
        raw: Option<Spanned<BTreeMap<String, toml::Value>>>,
        key: &str,
        v: &Validator,
    ) -> Result<Select, ManifestError> {
        let Some(raw) = raw else {
            return Ok(Select::new());
        };
        let span = raw.span();
        let mut select = Select::new();
        for (axis, value) in raw.into_inner() {
            let key = format!("{key}.{axis}");
            let Some(def) = self.spec.axis(&axis) else {
                return Err(v.error(
                    span,
                    key,
                    format!("`{axis}` is not an axis of `{}`", self.spec.name),
                ));
            };
            let listed = match &value {
                toml::Value::Array(items) => items.clone(),
                scalar => vec![scalar.clone()],
            };
            if listed.is_empty() {
                return Err(v.error(
                    span,
                    key,
                    format!("`{axis} = []` keeps no value of `{axis}`, so nothing could ever be selected: list the values kept, or leave `{axis}` out"),
                ));
            }
            let have = self.axis_values(&axis).unwrap_or_default();
            let mut values = Vec::new();
            for item in &listed {
                let value = param_from_toml(item)
                    .and_then(|p| def.kind.check(&p))
                    .map_err(|m| v.error(span.clone(), key.clone(), m))?;
                if !have.contains(&value) {
                    return Err(v.error(
                        span.clone(),
                        key.clone(),
                        format!(
                            "the study never runs {axis} = {value}; it runs {}",
                            have.iter()
                                .map(|x| x.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
                values.push(value);
            }
            select.insert(axis, values);
        }
        Ok(select)
    }
}

impl Validator<'_> {
    pub(super) fn validate_tables(
        &self,
        study: &StudyShape,
        raw: Vec<Spanned<RawTable>>,
    ) -> Result<Vec<TableSpec>, ManifestError> {
        let mut tables = Vec::new();
        for (i, spanned) in raw.into_iter().enumerate() {
            let table_span = spanned.span();
            let raw = spanned.into_inner();
            let key = |k: &str| format!("table[{i}].{k}");
            self.plain_text(&raw.title, &key("title"), "the title")?;
            let rows = study.dimension(&raw.rows, &key("rows"), self)?;
            let columns = study.dimension(&raw.columns, &key("columns"), self)?;
            if rows == columns {
                return Err(self.error(
                    raw.columns.span(),
                    key("columns"),
                    "rows and columns must run over different things".into(),
                ));
            }
            let value = Quantity::parse(raw.value.get_ref()).ok_or_else(|| {
                self.error(
                    raw.value.span(),
                    key("value"),
                    format!(
                        "unknown value `{}`; one of: {}",
                        raw.value.get_ref(),
                        Quantity::NAMES.join(", ")
                    ),
                )
            })?;
            let variants = match &raw.variants {
                None => study.variants.iter().map(|v| v.name.clone()).collect(),
                Some(list) => study.variant_list(list, &key("variants"), self)?,
            };
            study.dimension_applies(&rows, raw.rows.span(), &variants, &key("rows"), self)?;
            let columns_span = raw.columns.span();
            study.dimension_applies(&columns, columns_span, &variants, &key("columns"), self)?;
            if value == Quantity::PercentOfPeak {
                self.peak_variants(study, &raw.variants, &raw.value, &variants, &key)?;
            }
            let baseline = match raw.baseline {
                Some(b) => {
                    study.variant(&b, &key("baseline"), self)?;
                    Some(b.into_inner())
                }
                None => None,
            };
            if value == Quantity::Speedup && baseline.is_none() {
                return Err(self.error(
                    raw.value.span(),
                    key("value"),
                    "a speedup table needs `baseline = \"<variant>\"`".into(),
                ));
            }
            let select = study.select(raw.select, &key("select"), self)?;
            // Every axis that varies must be the rows, the columns or selected, or a cell would
            // hold several cases. With a row or column a variant, an axis a variant fixes
            // (`params = { layout = [...] }`) varies only if one shown variant takes several.
            let by_variant = rows == Dimension::Variant || columns == Dimension::Variant;
            for (axis, values) in study.axes {
                let varies = if by_variant {
                    variants.iter().any(|name| {
                        study
                            .variants
                            .iter()
                            .filter(|v| &v.name == name)
                            .any(|v| v.params.get(axis).map_or(values.0.len(), Vec::len) > 1)
                    })
                } else {
                    values.0.len() > 1 || study.axis_values(axis).is_some_and(|v| v.len() > 1)
                };
                let placed = rows == Dimension::Axis(axis.clone())
                    || columns == Dimension::Axis(axis.clone())
                    || select.get(axis).is_some_and(|v| v.len() == 1);
                if varies && !placed {
                    return Err(self.error(
                        table_span.clone(),
                        key("select"),
                        format!("axis `{axis}` takes several values, so a cell would hold several cases: make it the rows or the columns, or select one value (select = {{ {axis} = ... }})"),
                    ));
                }
            }
            let column_values: Vec<String> = match &columns {
                Dimension::Variant => variants.clone(),
                Dimension::Axis(axis) => study
                    .axis_values(axis)
                    .unwrap_or_default()
                    .iter()
                    .map(|v| v.to_string())
                    .collect(),
            };
            let mut references = Vec::new();
            for (j, reference) in raw.references.into_iter().enumerate() {
                let key = |k: &str| format!("table[{i}].reference[{j}].{k}");
                let reference = reference.into_inner();
                references.push(self.reference_row(
                    reference,
                    value,
                    &columns,
                    &column_values,
                    &key,
                )?);
            }
            tables.push(TableSpec {
                title: raw.title.into_inner(),
                rows,
                columns,
                value,
                variants,
                select,
                baseline,
                references,
            });
        }
        Ok(tables)
    }

    /// A `percent_of_peak` table: the copy peak is the GPU's, so a CPU variant's cells are
    /// always empty; refused where listed, or where no shown variant is a CUDA one.
    fn peak_variants(
        &self,
        study: &StudyShape,
        listed: &Option<Spanned<Vec<String>>>,
        value: &Spanned<String>,
        variants: &[String],
        key: &dyn Fn(&str) -> String,
    ) -> Result<(), ManifestError> {
        let cpu = variants.iter().find(|name| {
            study
                .backends(std::slice::from_ref(name))
                .any(|b| b != Backend::Cuda)
        });
        let (span, key) = match listed {
            Some(list) => (list.span(), key("variants")),
            None => (value.span(), key("value")),
        };
        let no_cuda = !study.backends(variants).any(|b| b == Backend::Cuda);
        match cpu {
            Some(name) if listed.is_some() || no_cuda => Err(self.error(
                span,
                key,
                format!(
                    "`{name}` is not a CUDA variant: the copy peak is the GPU's, so its \
                     percent_of_peak cells would always be empty; show CUDA variants only"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// One `[[table.reference]]` row: plain-text label and source, a unit the table's value is
    /// given in, columns of the table, and figures that are finite and above 0 (a time, a
    /// rate or a share of `nan`, `inf` or -3 is a typo, not a published figure).
    fn reference_row(
        &self,
        reference: RawReference,
        value: Quantity,
        columns: &Dimension,
        column_values: &[String],
        key: &dyn Fn(&str) -> String,
    ) -> Result<ReferenceRow, ManifestError> {
        self.plain_text(&reference.label, &key("label"), "the reference's label")?;
        self.plain_text(&reference.source, &key("source"), "the reference's source")?;
        let unit = Unit::parse(reference.unit.get_ref())
            .filter(|u| value.units().contains(u))
            .ok_or_else(|| {
                self.error(
                    reference.unit.span(),
                    key("unit"),
                    format!(
                        "a {} figure is given in {}",
                        value.name(),
                        value
                            .units()
                            .iter()
                            .map(|u| format!("\"{u}\""))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                )
            })?;
        for (column, figure) in reference.values.get_ref() {
            if !column_values.contains(column) {
                return Err(self.error(
                    reference.values.span(),
                    key("values"),
                    format!(
                        "`{column}` is not a column of this table ({}); its columns: {}",
                        columns.name(),
                        column_values.join(", ")
                    ),
                ));
            }
            // Zero is allowed only for an error (a max_rel_err of 0 is exact).
            let zero_ok = value == Quantity::MaxRelErr;
            if !(figure.is_finite() && (*figure > 0.0 || (zero_ok && *figure == 0.0))) {
                return Err(self.error(
                    reference.values.span(),
                    key("values"),
                    format!(
                        "the figure for `{column}` is {figure}; a published {} must be a finite \
                         number {}",
                        value.name(),
                        if zero_ok { "of 0 or more" } else { "above 0" }
                    ),
                ));
            }
        }
        Ok(ReferenceRow {
            label: reference.label.into_inner(),
            source: reference.source.into_inner(),
            unit,
            values: reference.values.into_inner(),
        })
    }

    /// A `passes` claim's variants: one (`a`) or a list (`variants`), not both.
    fn passes_variants(
        &self,
        study: &StudyShape,
        a: Option<Spanned<String>>,
        variants: Option<Spanned<Vec<String>>>,
        claim_span: std::ops::Range<usize>,
        key: &dyn Fn(&str) -> String,
    ) -> Result<Vec<String>, ManifestError> {
        match (a, variants) {
            (Some(a), None) => {
                study.variant(&a, &key("a"), self)?;
                Ok(vec![a.into_inner()])
            }
            (None, Some(list)) => study.variant_list(&list, &key("variants"), self),
            _ => Err(self.error(
                claim_span,
                key("a"),
                "a `passes` claim names one variant (`a`) or several (`variants`)".into(),
            )),
        }
    }

    pub(super) fn validate_claims(
        &self,
        study: &StudyShape,
        raw: Vec<Spanned<RawClaim>>,
    ) -> Result<Vec<ClaimSpec>, ManifestError> {
        let mut claims = Vec::new();
        for (i, spanned) in raw.into_iter().enumerate() {
            let claim_span = spanned.span();
            let raw = spanned.into_inner();
            let key = |k: &str| format!("claim[{i}].{k}");
            self.plain_text(&raw.text, &key("text"), "the claim's text")?;
            self.plain_text(&raw.source, &key("source"), "the claim's source")?;
            let kind = raw.kind.get_ref().as_str();
            if !CLAIM_KINDS.contains(&kind) {
                return Err(self.error(
                    raw.kind.span(),
                    key("kind"),
                    format!("unknown kind `{kind}`; one of: {}", CLAIM_KINDS.join(", ")),
                ));
            }
            let need = |field: Option<Spanned<String>>, name: &str| {
                field.ok_or_else(|| {
                    self.error(
                        claim_span.clone(),
                        key(name),
                        format!("a `{kind}` claim needs `{name}`"),
                    )
                })
            };
            let variant =
                |field: Option<Spanned<String>>, name: &str| -> Result<String, ManifestError> {
                    let field = need(field, name)?;
                    study.variant(&field, &key(name), self)?;
                    Ok(field.into_inner())
                };
            let fraction =
                |field: Option<Spanned<f64>>, name: &str, default: Option<f64>| match field {
                    Some(s) if !(*s.get_ref() > 0.0 && s.get_ref().is_finite()) => Err(self.error(
                        s.span(),
                        key(name),
                        format!("`{name}` must be a positive number"),
                    )),
                    Some(s) => Ok(s.into_inner()),
                    None => default.ok_or_else(|| {
                        self.error(
                            claim_span.clone(),
                            key(name),
                            format!("a `{kind}` claim needs `{name}`"),
                        )
                    }),
                };
            let check = match kind {
                "faster" => {
                    let b_span = raw.b.as_ref().map_or(claim_span.clone(), |b| b.span());
                    let (a, b) = (variant(raw.a, "a")?, variant(raw.b, "b")?);
                    if a == b {
                        return Err(self.error(
                            b_span,
                            key("b"),
                            format!("`a` and `b` are both `{a}`: a variant is never faster than itself; name two variants"),
                        ));
                    }
                    Check::Faster {
                        a,
                        b,
                        by: fraction(raw.by, "by", Some(1.0))?,
                    }
                }
                "reaches_peak" => {
                    let a = variant(raw.a, "a")?;
                    if study
                        .variants
                        .iter()
                        .any(|v| v.name == a && v.backend != Backend::Cuda)
                    {
                        return Err(self.error(
                            claim_span,
                            key("a"),
                            "the copy peak is the GPU's: a `reaches_peak` claim names a CUDA variant".into(),
                        ));
                    }
                    Check::ReachesPeak {
                        a,
                        share: fraction(raw.share, "share", None)?,
                    }
                }
                "passes" => Check::Passes {
                    variants: self.passes_variants(study, raw.a, raw.variants, claim_span, &key)?,
                },
                _ => {
                    let quantity = need(raw.quantity, "quantity")?;
                    if quantity.get_ref() == "speedup" {
                        return Err(self.error(
                            quantity.span(),
                            key("quantity"),
                            "a trend follows a quantity of one variant: median, gbytes_per_s, ... (not speedup)".into(),
                        ));
                    }
                    let along = need(raw.along, "along")?;
                    study.axis_name(&along, &key("along"), self)?;
                    let a = variant(raw.a, "a")?;
                    let dimension = Dimension::Axis(along.get_ref().clone());
                    let shown = std::slice::from_ref(&a);
                    study.dimension_applies(
                        &dimension,
                        along.span(),
                        shown,
                        &key("along"),
                        self,
                    )?;
                    Check::Trend {
                        a,
                        quantity: Quantity::parse(quantity.get_ref()).ok_or_else(|| {
                            self.error(
                                quantity.span(),
                                key("quantity"),
                                format!(
                                    "unknown quantity `{}`; one of: {}",
                                    quantity.get_ref(),
                                    Quantity::NAMES.join(", ")
                                ),
                            )
                        })?,
                        along: along.into_inner(),
                        rising: kind == "rises",
                    }
                }
            };
            claims.push(ClaimSpec {
                text: raw.text.into_inner(),
                source: raw.source.into_inner(),
                check,
                select: study.select(raw.select, &key("select"), self)?,
            });
        }
        Ok(claims)
    }
}

// The JSON Schema of the keys whose names are this module's own (the rest of the manifest's
// schema is in `json_schema`, which needs nothing from here).
fn quantity_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    json_schema::names_of(Quantity::NAMES.to_vec())
}

fn unit_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    json_schema::names_of(Unit::names())
}

fn claim_kind_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    json_schema::names_of(CLAIM_KINDS.to_vec())
}
