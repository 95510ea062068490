//! What a history read narrows to, as SQL conditions: shared by the page
//! and count reads (`history`) and the kept sums (`history_counts`).

use super::{Error, Result};
use crate::domain::{FailureReason, Millis, Status};
use sqlx::Arguments;
use sqlx::any::{Any, AnyArguments};

/// What a history read narrows to. `None` narrows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryFilter {
    pub project_id: String,
    pub tool_name: Option<String>,
    pub toolkit_name: Option<String>,
    pub user_id: Option<String>,
    pub status: Option<Status>,
    pub failure_reason: Option<FailureReason>,
    /// created_at >= this
    pub created_from: Option<Millis>,
    /// created_at < this
    pub created_before: Option<Millis>,
}

pub(super) fn add<'t, T>(args: &mut AnyArguments, v: T) -> Result<()>
where
    T: sqlx::Encode<'t, Any> + sqlx::Type<Any>,
{
    args.add(v).map_err(|e| Error::Database(sqlx::Error::Encode(e)))
}

/// Conditions joined by `AND`, each with the argument it binds.
#[derive(Default)]
pub(super) struct Where {
    pub(super) clauses: Vec<String>,
    pub(super) args: AnyArguments,
}

impl Where {
    /// Adds `{column_op} $n` with `v` as argument `n`.
    pub(super) fn and<'t, T>(&mut self, column_op: &str, v: T) -> Result<()>
    where
        T: sqlx::Encode<'t, Any> + sqlx::Type<Any>,
    {
        add(&mut self.args, v)?;
        self.clauses.push(format!("{column_op} ${}", self.args.len()));
        Ok(())
    }
}

/// The conditions of `f` alone, `project_id = $1` first.
pub(super) fn narrowing(f: &HistoryFilter) -> Result<Where> {
    let mut w = Where::default();
    w.and("project_id =", f.project_id.clone())?;
    for (column_op, value) in
        [("tool_name =", &f.tool_name), ("toolkit_name =", &f.toolkit_name), ("user_id =", &f.user_id)]
    {
        if let Some(v) = value {
            w.and(column_op, v.clone())?;
        }
    }
    if let Some(s) = f.status {
        w.and("status =", s.as_str())?;
    }
    if let Some(r) = f.failure_reason {
        // Only a failed run has a failure reason, so this narrows nothing;
        // it lets Postgres read the index of failed runs only.
        if f.status.is_none() {
            w.and("status =", Status::Failed.as_str())?;
        }
        w.and("failure_reason =", r.as_str())?;
    }
    if let Some(t) = f.created_from {
        w.and("created_at >=", t)?;
    }
    if let Some(t) = f.created_before {
        w.and("created_at <", t)?;
    }
    Ok(w)
}
