//! `Custom`: a manifest's own kernels as an algorithm (`DynAlgorithm`), built from its checked
//! definition (`def::CustomDef`), and `CustomCase`, one grid point of it (`BoundCase`): the
//! buffers' lengths, seeded inputs, the outputs' expected values (from `.npy` files, from the
//! study's reference command, or left for the reference kernel sequence; the command runs once
//! per grid point, or per case where it is told the variant, outside the timing), the bytes and
//! flops, the kernel file compiled with the case's defines, and the check command's verdict on
//! an answer.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::def::{AxisKindDecl, CommandDecl, CustomDef, ElemType, Expected, Init, Role};
use super::schedule::{self, case_dtype, param_value};
use crate::algos::{
    AxisDef, AxisDefault, AxisKind, BoundCase, Buffers, CaseData, CpuRun, DynAlgorithm, Length,
    OutputSpec, Spec,
};
use crate::device::{DeviceIo, Gpu, KernelFile, Launcher};
use crate::draws;
use crate::expr::Value;
use crate::record::{CheckVerdict, Variant};
use crate::reference_command::{
    self, ExpectedOutput, ReferenceCommand, KERNEL_ENV, PARAMS_ENV, VARIANT_ENV,
};
use crate::stage_clock::{self, Stage};
use crate::vocab::{DType, HostData, ParamValue, Params, Tolerance};
use rayon::slice::ParallelSliceMut;

/// The name a manifest gives as `study.algorithm` for its own kernels.
pub const CUSTOM: &str = "custom";

/// Names leaked once per definition: a spec's strings are `'static` (see `Spec`).
fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

#[derive(Debug)]
pub struct Custom {
    spec: Spec,
    pub def: CustomDef,
    /// Buffer names as the case's `Buffers` hold them.
    buffer_names: Vec<&'static str>,
    /// The kernel file for each define set, made once: NVRTC modules are cached by its name.
    files: Mutex<HashMap<String, KernelFile>>,
    /// Where the reference command's outputs are kept for the run's other processes, one
    /// folder per answer (see `ReferenceCommand::shared`).
    pub shared_references: Option<PathBuf>,
    /// The reference command's last answer, by what it is a function of (see
    /// `command_references`).
    last_reference: Mutex<Option<(u64, Vec<Vec<f64>>)>>,
}

impl Custom {
    pub fn new(def: CustomDef) -> Custom {
        let axes: Vec<AxisDef> = def.axes.iter().map(axis_def).collect();
        let first = def.sources.first();
        let kernel_file = KernelFile::embedded(
            leak(&first.map_or(String::new(), |s| s.path.display().to_string())),
            leak(&first.map_or(String::new(), |s| s.text.clone())),
        );
        let fixed_dtype = match def.axes.iter().any(|a| a.name == "dtype") {
            true => None,
            false => (def.buffers.iter())
                .find(|b| b.role.is_output())
                .and_then(|b| match b.elem {
                    ElemType::Fixed(d) => Some(d),
                    ElemType::FromDtype => None,
                }),
        };
        let spec = Spec {
            name: CUSTOM,
            title: leak(&def.title),
            axes: Box::leak(axes.into_boxed_slice()),
            kernels: def.kernels.iter().map(|k| leak(&k.name)).collect(),
            fixed_dtype,
            kernel_file,
            ..Spec::DEFAULT
        };
        let buffer_names = def.buffers.iter().map(|b| leak(&b.name)).collect();
        Custom {
            spec,
            def,
            buffer_names,
            files: Mutex::new(HashMap::new()),
            shared_references: None,
            last_reference: Mutex::new(None),
        }
    }

    /// The kernel file kernel sequence `kernel` compiles from at `params`: the sources with the
    /// point's defines in front, each behind a `#line` naming the user's file (so NVRTC's
    /// messages point at the user's own lines); the include folders (the study's, then CUDA's
    /// own headers: `device::headers`) and compiler options (the study's, then the sequence's);
    /// and every launch's kernel name with the point's values in it. Made once per define set and
    /// options: NVRTC modules are cached by its name.
    pub fn kernel_file(&self, params: &Params, kernel: &str) -> Result<KernelFile> {
        let def = &self.def;
        let program = (def.kernels.iter())
            .find(|k| k.name == kernel)
            .ok_or_else(|| crate::algos::unknown(&self.spec, "kernel", kernel))?;
        let names = |name: &str| params.get(name).map(param_value);
        let mut defines: Vec<(&str, String)> = Vec::new();
        for (name, text) in &def.defines {
            let value = schedule::eval(text, &format!("custom.defines.{name}"), &names)
                .map_err(|e| anyhow!("{e}"))?;
            defines.push((name, super::defines::c_text(&value)));
        }
        let chosen: Vec<&String> = (def.compiler_options.iter())
            .chain(&program.compiler_options)
            .collect();
        // The include folders are the same for every file of the process: not in the key.
        let mut options: Vec<String> = (def.include_dirs.iter())
            .chain(&crate::device::headers::cuda_headers().include_dirs())
            .map(|d| format!("--include-path={}", d.display()))
            .collect();
        options.extend(chosen.iter().map(|o| o.to_string()));
        let emitted: Vec<String> = (defines.iter())
            .filter(|(name, _)| !def.undefine.iter().any(|u| u == name))
            .map(|(name, text)| format!("{name}={text}"))
            .collect();
        let mut key = format!("[{}]", emitted.join(" "));
        for option in chosen {
            key.push(' ');
            key.push_str(option);
        }
        let mut files = self
            .files
            .lock()
            .map_err(|_| anyhow!("kbench bug: a poisoned lock"))?;
        if let Some(file) = files.get(&key) {
            return Ok(*file);
        }
        let mut text = String::new();
        for define in &emitted {
            let (name, value) = define.split_once('=').unwrap_or((define, ""));
            text.push_str(&format!("#define {name} {value}\n"));
        }
        for source in &def.sources {
            text.push_str(&format!("#line 1 \"{}\"\n", source.path.display()));
            text.push_str(&source.text);
            text.push('\n');
        }
        // A name reads the defines (the undefined too), then the axes.
        let value_of = |word: &str| {
            (defines.iter().find(|(name, _)| *name == word))
                .map(|(_, text)| text.clone())
                .or_else(|| names(word).map(|v| super::defines::c_text(&v)))
        };
        let mut kernel_names: Vec<(String, String)> = Vec::new();
        for launch in def.kernels.iter().flat_map(|k| &k.launches) {
            if !kernel_names
                .iter()
                .any(|(written, _)| *written == launch.kernel)
            {
                let instance = super::defines::substitute(&launch.kernel, &value_of);
                kernel_names.push((launch.kernel.clone(), instance));
            }
        }
        let file = KernelFile {
            name: leak(&format!("{} {key}", self.spec.kernel_file.name)),
            source: leak(&text),
            options: Box::leak(options.into_boxed_slice()),
            names: Box::leak(kernel_names.into_boxed_slice()),
        };
        files.insert(key, file);
        Ok(file)
    }
}

/// An axis as the framework declares it.
fn axis_def(decl: &super::def::AxisDecl) -> AxisDef {
    let kind = match &decl.kind {
        AxisKindDecl::Size => AxisKind::Size,
        AxisKindDecl::Int { min, max } => AxisKind::Int {
            min: *min,
            max: *max,
        },
        AxisKindDecl::Float { min, max } => AxisKind::Float {
            min: *min,
            max: *max,
        },
        AxisKindDecl::Choice(names) => {
            let names: Vec<&'static str> = names.iter().map(|n| leak(n)).collect();
            AxisKind::Choice(Box::leak(names.into_boxed_slice()))
        }
        AxisKindDecl::Dtype(allowed) => {
            AxisKind::Dtype(Box::leak(allowed.clone().into_boxed_slice()))
        }
        // Any block a GPU can run (48, 96, 384, ...): a custom kernel is not limited to the
        // powers of two the built-ins take.
        AxisKindDecl::Block => AxisKind::Int {
            min: 1,
            max: super::schedule::MAX_BLOCK_THREADS as i64,
        },
    };
    let default = decl.default.as_ref().map(|d| match d {
        ParamValue::Int(i) => AxisDefault::Int(*i),
        ParamValue::Float(x) => AxisDefault::Float(*x),
        ParamValue::Str(s) => AxisDefault::Str(leak(s)),
    });
    AxisDef {
        name: leak(&decl.name),
        kind,
        default,
        only_for: None,
        doc: leak(&decl.doc),
    }
}

impl DynAlgorithm for Custom {
    fn spec(&self) -> &Spec {
        &self.spec
    }

    fn bind(&self, params: &Params) -> Result<Box<dyn BoundCase + '_>> {
        let names = |name: &str| params.get(name).map(param_value);
        let dtype = case_dtype(params);
        let mut buffers = Vec::new();
        for (i, b) in self.def.buffers.iter().enumerate() {
            let key = format!("custom.buffer[{i}].length");
            let len = schedule::eval_count(&b.length, &key, "the length", isize::MAX as u64, &names)
                .map_err(|e| anyhow!("{e}"))? as usize;
            let elem = match b.elem {
                ElemType::Fixed(d) => d,
                ElemType::FromDtype => {
                    dtype.context("a buffer of type `dtype` needs a `dtype` axis")?
                }
            };
            buffers.push((elem, len));
        }
        Ok(Box::new(CustomCase {
            algorithm: self,
            params: params.clone(),
            buffers,
        }))
    }
}

/// One grid point of a custom study: each buffer's element type and length.
pub struct CustomCase<'a> {
    algorithm: &'a Custom,
    params: Params,
    pub buffers: Vec<(DType, usize)>,
}

impl CustomCase<'_> {
    fn names(&self) -> impl Fn(&str) -> Option<Value> + '_ {
        |name| self.params.get(name).map(param_value)
    }

    fn count(&self, text: &str, key: &str) -> Result<u64> {
        schedule::eval_count(text, key, key, u64::MAX, &self.names()).map_err(|e| anyhow!("{e}"))
    }

    /// Fills the expected values of the outputs checked against the study's reference command
    /// (`outputs` are the output buffers in declaration order), running it once on `inputs`;
    /// told the `variant` where it runs per variant.
    fn command_references(
        &self,
        seed: u64,
        variant: Option<&Variant>,
        inputs: &[(&'static str, HostData)],
        outputs: &mut [OutputSpec],
    ) -> Result<()> {
        let def = &self.algorithm.def;
        let by_command: Vec<usize> = (def.buffers.iter().filter(|b| b.role.is_output()))
            .enumerate()
            .filter(|(_, b)| b.expected == Some(Expected::Command))
            .map(|(i, _)| i)
            .collect();
        let Some(decl) = def
            .reference_command
            .as_ref()
            .filter(|_| !by_command.is_empty())
        else {
            return Ok(());
        };
        let visible: Params = match &decl.axes {
            Some(axes) => (self.params.iter())
                .filter(|(axis, _)| axes.contains(axis))
                .map(|(axis, value)| (axis.clone(), value.clone()))
                .collect(),
            None => self.params.clone(),
        };
        let params = serde_json::to_string(&visible).context("the case's parameters")?;
        // What the answer is a function of: the inputs (drawn from the seed, each buffer's name,
        // type and length, and the visible axes) and what the command is told.
        let key = {
            let mut hasher = fnv::FnvHasher::default();
            (seed, &params, &decl.argv, &self.buffers).hash(&mut hasher);
            variant.map(|v| &v.name).hash(&mut hasher);
            hasher.finish()
        };
        let mut last = (self.algorithm.last_reference.lock()).unwrap_or_else(|e| e.into_inner());
        if let Some((_, values)) = last.as_ref().filter(|(made_for, _)| *made_for == key) {
            for (&i, reference) in by_command.iter().zip(values) {
                outputs[i].reference = reference.clone();
            }
            return Ok(());
        }
        // Dropped before the command runs: it and this answer may not both fit.
        *last = None;
        let shared =
            (self.algorithm.shared_references.as_ref()).map(|dir| dir.join(format!("{key:016x}")));
        let command = ReferenceCommand {
            shared,
            ..command_of(decl, "reference command", params, variant)
        };
        let expected: Vec<ExpectedOutput> = (by_command.iter())
            .map(|&i| ExpectedOutput {
                name: outputs[i].name,
                len: outputs[i].capacity,
            })
            .collect();
        let inputs: Vec<(&str, &HostData)> = inputs.iter().map(|(n, d)| (*n, d)).collect();
        let values = reference_command::run(&command, &inputs, &expected)?;
        // Kept for the next configuration of the same problem (`reference_command.axes`); a
        // grid point's own variants share its whole data already (`run::case`).
        if decl.axes.is_none() {
            for (i, reference) in by_command.into_iter().zip(values) {
                outputs[i].reference = reference;
            }
            return Ok(());
        }
        for (&i, reference) in by_command.iter().zip(&values) {
            outputs[i].reference = reference.clone();
        }
        *last = Some((key, values));
        Ok(())
    }
}

/// How to run `decl` for a case whose visible parameters are `params` (JSON), told its
/// `variant` where it has one.
fn command_of(
    decl: &CommandDecl,
    what: &'static str,
    params: String,
    variant: Option<&Variant>,
) -> ReferenceCommand {
    let mut env = vec![(PARAMS_ENV.to_string(), params)];
    if let Some(variant) = variant {
        env.push((VARIANT_ENV.to_string(), variant.name.clone()));
        env.push((KERNEL_ENV.to_string(), variant.implementation.clone()));
    }
    ReferenceCommand {
        what,
        argv: decl.argv.clone(),
        working_dir: decl.working_dir.clone(),
        // The manifest's check keeps it positive; a huge one means no limit.
        time_limit: Duration::try_from_secs_f64(decl.timeout_s).unwrap_or(Duration::MAX),
        env,
        shared: None,
    }
}

/// The default tolerance of a float output checked against a reference kernel that sums in
/// another order: loose enough for reordered float sums, tight enough to catch a wrong element.
/// The 16-bit floats get 4 of their epsilons (about 2 roundings each way), the 8-bit ones one
/// (their epsilon is already 1/8 or 1/4); integers are exact.
fn default_tolerance(dtype: DType) -> Tolerance {
    match dtype {
        DType::F32 => Tolerance::relative(1e-5),
        DType::F64 => Tolerance::relative(1e-12),
        DType::F8E4M3 | DType::F8E5M2 => Tolerance::relative(dtype.epsilon().unwrap_or(0.0)),
        other => Tolerance::relative(4.0 * other.epsilon().unwrap_or(0.0)),
    }
}

impl BoundCase for CustomCase<'_> {
    fn footprint_bytes(&self, _implementation: &str) -> Option<u64> {
        let mut total: u64 = 0;
        for ((dtype, len), decl) in self.buffers.iter().zip(&self.algorithm.def.buffers) {
            let bytes = (*len as u64).checked_mul(dtype.size_bytes())?;
            // An output's reference is held as float64 beside it.
            let reference = if decl.role.is_output() {
                (*len as u64).checked_mul(8)?
            } else {
                0
            };
            total = total.checked_add(bytes)?.checked_add(reference)?;
        }
        Some(total)
    }

    fn prepare(&self, seed: u64) -> Result<CaseData> {
        let def = &self.algorithm.def;
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        for (i, decl) in def.buffers.iter().enumerate() {
            let name = self.algorithm.buffer_names[i];
            let (dtype, len) = self.buffers[i];
            if decl.role.is_input() {
                let data = match &decl.init {
                    Init::Copy(from) => copy_of(&inputs, from, dtype, len),
                    Init::Expr(text) => {
                        self.values_of(text, &format!("custom.buffer[{i}].init"), dtype, len)
                    }
                    Init::Offsets(text) => {
                        let total = self.count(text, &format!("custom.buffer[{i}].init"))?;
                        offsets(total, dtype, len, seed, &decl.name)
                    }
                    init => initial(init, dtype, len, seed, &decl.name),
                }
                .with_context(|| format!("buffer `{}`", decl.name))?;
                inputs.push((name, data));
            }
            if decl.role.is_output() {
                let reference = match &decl.expected {
                    Some(Expected::Npy(path)) => {
                        stage_clock::time(Stage::Reference, || read_npy(path, dtype, len))?.to_f64()
                    }
                    // Filled in below, once every input is made.
                    Some(Expected::Command) => Vec::new(),
                    // Filled in by the reference kernel sequence's run (see `reference_kernel`).
                    Some(Expected::Reference) | None => Vec::new(),
                    // None: the check command alone judges it.
                    Some(Expected::CheckCommand) => Vec::new(),
                };
                outputs.push(OutputSpec {
                    name,
                    dtype,
                    capacity: len,
                    length: Length::Full,
                    reference,
                    tolerance: (decl.tolerance)
                        .map_or(default_tolerance(dtype), |t| t.for_type(dtype)),
                    in_place: (decl.role == Role::InOut).then_some(name),
                    checked: None,
                    max_mismatches: decl.max_mismatches,
                    compared: decl.expected != Some(Expected::CheckCommand),
                });
            }
        }
        if !(def.reference_command.as_ref()).is_some_and(|c| c.per_variant) {
            stage_clock::time(Stage::Reference, || {
                self.command_references(seed, None, &inputs, &mut outputs)
            })?;
        }
        let (bytes_read, bytes_written) =
            def.traffic.split(self.count(&def.bytes, "custom.bytes")?);
        Ok(CaseData {
            inputs: Buffers(inputs),
            outputs,
            bytes_read,
            bytes_written,
            flops: self.count(&def.flops, "custom.flops")?,
            elements: self.count(&def.elements, "custom.elements")?,
            facts: Vec::new(),
        })
    }

    fn prepare_variant(&self, seed: u64, variant: &Variant, data: &mut CaseData) -> Result<()> {
        let def = &self.algorithm.def;
        if (def.reference_command.as_ref()).is_some_and(|c| c.per_variant) {
            self.command_references(seed, Some(variant), &data.inputs.0, &mut data.outputs)?;
        }
        Ok(())
    }

    fn unchecked(&self, implementation: &str) -> bool {
        (self.algorithm.def.kernels.iter()).any(|k| k.name == implementation && k.unchecked)
    }

    fn check_answer(
        &self,
        variant: &Variant,
        data: &CaseData,
        outputs: &Buffers,
    ) -> Result<Option<CheckVerdict>> {
        let Some(decl) = &self.algorithm.def.check_command else {
            return Ok(None);
        };
        let params = serde_json::to_string(&self.params).context("the case's parameters")?;
        let command = command_of(decl, "check command", params, Some(variant));
        let inputs: Vec<(&str, &HostData)> = data.inputs.0.iter().map(|(n, d)| (*n, d)).collect();
        let produced: Vec<(&str, &HostData)> = outputs.0.iter().map(|(n, d)| (*n, d)).collect();
        let references: Vec<(&str, HostData)> = (data.outputs.iter())
            .filter(|o| o.compared)
            .map(|o| (o.name, HostData::F64(o.reference.clone())))
            .collect();
        let references: Vec<(&str, &HostData)> = references.iter().map(|(n, d)| (*n, d)).collect();
        let verdict = reference_command::check(&command, &inputs, &produced, &references)?;
        Ok(Some(verdict))
    }

    fn cpu(&self, implementation: &str) -> Result<CpuRun> {
        Err(crate::algos::unknown(
            &self.algorithm.spec,
            "CPU implementation",
            implementation,
        ))
    }

    fn cuda<'a>(
        &self,
        kernel: &str,
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
    ) -> Result<Box<dyn Launcher + 'a>> {
        let def = &self.algorithm.def;
        let (index, program) = (def.kernels.iter().enumerate())
            .find(|(_, k)| k.name == kernel)
            .ok_or_else(|| crate::algos::unknown(&self.algorithm.spec, "kernel", kernel))?;
        let planned = schedule::plan(program, &format!("custom.kernel[{index}]"), &self.params)
            .map_err(|e| match e.unrunnable {
                true => anyhow::Error::new(crate::algos::Unrunnable(e.message)),
                false => anyhow!("{e}"),
            })?;
        let scratch = (def.buffers.iter().zip(&self.buffers))
            .filter(|(d, _)| d.role == Role::Scratch)
            .map(|(d, (dtype, len))| (d.name.clone(), *dtype, *len));
        for b in &def.buffers {
            if let Some(symbol) = &b.constant {
                gpu.fill_constant(symbol, io.input(&b.name)?)?;
            }
        }
        Ok(Box::new(super::launch::CustomLauncher::new(
            gpu, io, scratch, planned,
        )?))
    }

    fn kernel_file(&self, kernel: &str) -> Option<Result<KernelFile>> {
        Some(self.algorithm.kernel_file(&self.params, kernel))
    }

    fn unrunnable(&self, kernel: &str) -> Option<String> {
        let def = &self.algorithm.def;
        let (index, program) = def
            .kernels
            .iter()
            .enumerate()
            .find(|(_, k)| k.name == kernel)?;
        match schedule::plan(program, &format!("custom.kernel[{index}]"), &self.params) {
            Err(e) if e.unrunnable => Some(format!("kernel `{kernel}`: {}", e.message)),
            _ => None,
        }
    }

    fn reference_kernel(&self) -> Option<&str> {
        let def = &self.algorithm.def;
        let wanted = (def.buffers.iter())
            .any(|b| b.role.is_output() && matches!(b.expected, Some(Expected::Reference) | None));
        def.reference.as_deref().filter(|_| wanted)
    }

    fn guard_buffers(&self) -> bool {
        true
    }
}

/// The values of the input `from` (made before, the manifest's check says), as `dtype`: the
/// same type and length, the check says too, so this is a copy.
fn copy_of(
    inputs: &[(&'static str, HostData)],
    from: &str,
    dtype: DType,
    len: usize,
) -> Result<HostData> {
    let (_, source) = (inputs.iter())
        .find(|(name, _)| *name == from)
        .with_context(|| format!("kbench bug: no input `{from}` before the copy"))?;
    if source.dtype() != dtype || source.len() != len {
        bail!(
            "`{from}` holds {} {} values, and this buffer {len} {dtype}",
            source.len(),
            source.dtype()
        );
    }
    Ok(source.clone())
}

impl CustomCase<'_> {
    /// `text` at each index `i` of a buffer of `len` elements, rounded to `dtype`.
    fn values_of(&self, text: &str, key: &str, dtype: DType, len: usize) -> Result<HostData> {
        let expr = crate::expr::Expr::parse(text).map_err(|e| anyhow!("`{key}`: {}", e.message))?;
        let names = self.names();
        let mut values = Vec::with_capacity(len);
        for i in 0..len {
            let index = Value::Int(i as i64);
            let at = |name: &str| {
                if name == "i" {
                    Some(index.clone())
                } else {
                    names(name)
                }
            };
            let value = expr
                .eval(&at)
                .map_err(|e| anyhow!("`{key}` at i = {i}: {}", e.message))?;
            values.push(match value {
                Value::Int(v) => v as f64,
                Value::Float(x) => x,
                Value::Bool(b) => f64::from(u8::from(b)),
                Value::Str(s) => bail!("`{key}` at i = {i} is the string `{s}`, not a number"),
            });
        }
        Ok(HostData::from_f64(dtype, &values))
    }
}

/// A buffer's initial contents, drawn from its own stream of the study's seed, so that a
/// buffer's values do not change when another buffer is added (see `draws`).
fn initial(init: &Init, dtype: DType, len: usize, seed: u64, name: &str) -> Result<HostData> {
    let key = stream_key(seed, name);
    let values: Vec<f64> = match init {
        Init::Npy(path) => return read_npy(path, dtype, len),
        Init::Copy(_) | Init::Expr(_) | Init::Offsets(_) => {
            bail!("kbench bug: {init:?} is made by the case")
        }
        Init::Zeros => vec![0.0; len],
        Init::Constant(c) => vec![*c; len],
        Init::Iota => match dtype.integer_range() {
            // An integer iota wraps as C's conversion does: a byte buffer counts 0 .. 255, 0 ..
            Some((low, high)) if high - low < 2f64.powi(40) => {
                let span = high - low + 1.0;
                (0..len)
                    .map(|i| match (i as f64) % span {
                        v if v > high => v - span,
                        v => v,
                    })
                    .collect()
            }
            _ => (0..len).map(|i| i as f64).collect(),
        },
        Init::Uniform { low, high, sorted } => {
            let mut values = match dtype.is_float() {
                true => draws::uniform(key, len, *low, *high),
                false => draws::uniform_int(key, len, low.ceil() as i64, high.floor() as i64),
            };
            if *sorted {
                values.par_sort_unstable_by(f64::total_cmp);
            }
            values
        }
        Init::Normal { mean, std_dev } => draws::normal(key, len, *mean, *std_dev),
    };
    Ok(HostData::from_f64(dtype, &values))
}

/// The key of buffer `name`'s random stream: the study's seed mixed with the name.
fn stream_key(seed: u64, name: &str) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    name.hash(&mut hasher);
    seed ^ hasher.finish()
}

/// `len` offsets of `total` elements (CSR row pointers): 0 first, `total` last, and ascending
/// draws from [0, total] between them, from the buffer's own stream of the seed.
fn offsets(total: u64, dtype: DType, len: usize, seed: u64, name: &str) -> Result<HostData> {
    if let Some((_, high)) = dtype.integer_range() {
        if total as f64 > high {
            bail!("`offsets` reach {total}, above what {dtype} holds ({high})");
        }
    }
    let total = i64::try_from(total).context("`offsets`: the total is above 2^63")?;
    let mut values = draws::uniform_int(stream_key(seed, name), len, 0, total);
    values.par_sort_unstable_by(f64::total_cmp);
    if let Some(first) = values.first_mut() {
        *first = 0.0;
    }
    if len > 1 {
        values[len - 1] = total as f64;
    }
    Ok(HostData::from_f64(dtype, &values))
}

/// A `.npy` file's contents as a `len`-element buffer of `dtype`.
pub fn read_npy(path: &Path, dtype: DType, len: usize) -> Result<HostData> {
    // The data and a header of at most a few KiB: anything longer is not this array.
    let max_bytes = (len as u64).saturating_mul(8).saturating_add(1 << 20);
    let data = crate::npy::read_as(path, dtype, max_bytes)
        .map_err(|e| anyhow!("{} {e}", path.display()))?;
    if data.len() != len {
        bail!(
            "{} holds {} elements; the buffer has {len}",
            path.display(),
            data.len()
        );
    }
    Ok(data)
}
