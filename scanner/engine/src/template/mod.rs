//! Templates: the YAML model, the loader, and the runnability check.
//!
//! # Layout
//! - [`model`]: [`Template`], [`Info`], [`HttpBlock`] as the YAML writes them.
//! - [`loader`]: [`parse_str`], [`load_file`], [`load_dir`] (parallel), payload files.
//! - [`check`](mod@check): [`check()`] decides whether the engine can run a template, with
//!   [`Reason`]s that group well in reports.
//! - [`flow`]: [`FlowExpr`], the boolean `flow:` expressions run natively.
//! - [`summary`]: [`CheckSummary`], the grouped totals of `templates check`.
//! - `yaml`: lenient readers for the scalar and list shapes templates use.

pub mod check;
pub mod flow;
pub mod loader;
pub mod model;
pub mod summary;
mod yaml;

pub use check::{check, check_before_compiling, check_for, CheckOptions, Reason, Unrunnable};
pub use flow::{FlowError, FlowExpr};
pub use loader::{
    load_dir, load_dir_with, load_file, load_file_with, parse_str, parse_str_with, LoadError,
    LoadOptions, LoadReport,
};
pub use model::{
    Classification, HttpBlock, Info, PayloadDef, PayloadFile, Template, OTHER_PROTOCOLS,
};
pub use summary::{check_dir, check_dir_for, CheckSummary};
