//! Operator recovery (seed 000): a project operator reads any execution's safe
//! status, an operator with the payload permission its input and result, one
//! with the cancel permission stops it. Who may call what is
//! `authz::operator::TABLE`, re-checked against the credential as stored on
//! every call (a revoked permission fails closed at once). Every operation is
//! logged with the operator's credential id.

use super::lifecycle::{CancelOutcome, encode_cursor};
use super::{Engine, Error, Result, Scope};
use crate::audit::{action, outcome};
use crate::authz::{self, Principal, operator::Route};
use crate::crypto::Field;
use crate::domain::{ExecutionId, Status};
use crate::store::ExecutionRecord;
use base64::Engine as _;
use baton_proto::clock::now_ms;

/// The largest operator page.
pub(crate) const MAX_LIMIT: u32 = 200;

/// What the payload route answers.
#[derive(Clone, Debug)]
pub(crate) struct OperatorPayload {
    pub(crate) record: ExecutionRecord,
    /// The input the tool received.
    pub(crate) input: Option<String>,
    /// The original result, once completed.
    pub(crate) result: Option<String>,
}

/// The (created_at, id) a cursor from `encode_cursor` stands for.
fn after(cursor: &str) -> Result<Option<(i64, String)>> {
    if cursor.is_empty() {
        return Ok(None);
    }
    let bad = || Error::Invalid("`cursor` is not a cursor this server issued".into());
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?;
    let text = String::from_utf8(raw).map_err(|_| bad())?;
    let (at, id) = text.split_once(':').ok_or_else(bad)?;
    Ok(Some((at.parse().map_err(|_| bad())?, id.to_owned())))
}

/// What the audit log calls an operation on `route`.
fn action(route: Route) -> &'static str {
    match route {
        Route::List => action::OPERATOR_LIST,
        Route::Status => action::OPERATOR_STATUS,
        Route::Payload => action::OPERATOR_PAYLOAD,
        Route::Cancel => action::OPERATOR_CANCEL,
    }
}

impl Engine {
    async fn operator(&self, authorization: Option<&str>, scope: Scope<'_>, route: Route) -> Result<Principal> {
        let p = self.authenticate(authorization).await?;
        self.operator_check(&p, scope, route, None).await?;
        Ok(p)
    }

    /// Checks `route` for `p`; a refusal of a caller of the project is audited.
    async fn operator_check(&self, p: &Principal, scope: Scope<'_>, route: Route, target: Option<&str>) -> Result<()> {
        p.in_scope(scope.org_id, scope.project_id)?;
        if let Err(e) = authz::operator::check(p, scope.org_id, scope.project_id, route) {
            self.audit(p, scope, action(route), target, outcome::REFUSED, Some(e.to_string())).await?;
            return Err(e.into());
        }
        Ok(())
    }

    /// Authenticates, checks `route`, and reads an execution of the scope's
    /// project (the uniform not-found for anything else), in one round trip.
    async fn operator_read(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
        route: Route,
    ) -> Result<(Principal, ExecutionRecord)> {
        let Some(execution_id) = ExecutionId::parse(id) else {
            let p = self.operator(authorization, scope, route).await?;
            self.audit(&p, scope, action(route), Some(id), outcome::NOT_FOUND, None).await?;
            return Err(authz::Error::NotFound.into());
        };
        let (credential, record) = self.credential_with_execution(authorization, &execution_id).await?;
        let p = Principal::from_credential(credential)?;
        self.operator_check(&p, scope, route, Some(id)).await?;
        match record {
            Some(r)
                if r.org_id == scope.org_id
                    && r.project_id == scope.project_id
                    && r.retention_expires_at > now_ms() =>
            {
                tracing::info!(operator = %p.credential_id(), execution_id = %r.id, route = ?route, "operator access");
                // A cancel is recorded with its outcome, once it has one.
                if route != Route::Cancel {
                    self.audit(&p, scope, action(route), Some(id), outcome::ALLOWED, None).await?;
                }
                Ok((p, r))
            }
            _ => {
                self.audit(&p, scope, action(route), Some(id), outcome::NOT_FOUND, None).await?;
                Err(authz::Error::NotFound.into())
            }
        }
    }

    /// The project's executions, newest first; the next page's cursor when there is one.
    pub(crate) async fn operator_list(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        limit: u32,
        cursor: &str,
    ) -> Result<(Vec<ExecutionRecord>, Option<String>)> {
        let p = self.operator(authorization, scope, Route::List).await?;
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::Invalid(format!("`limit` must be between 1 and {MAX_LIMIT}")));
        }
        let after = after(cursor)?;
        let mut rows = self.store.project_executions(scope.project_id, now_ms(), limit + 1, after).await?;
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next = if more { rows.last().map(encode_cursor) } else { None };
        self.audit(&p, scope, action::OPERATOR_LIST, None, outcome::ALLOWED, None).await?;
        Ok((rows, next))
    }

    /// One execution's safe status (never a payload).
    pub(crate) async fn operator_status(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
    ) -> Result<ExecutionRecord> {
        Ok(self.operator_read(authorization, scope, id, Route::Status).await?.1)
    }

    /// One execution's input and, once completed, its original result.
    pub(crate) async fn operator_payload(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
    ) -> Result<OperatorPayload> {
        let (_, record) = self.operator_read(authorization, scope, id, Route::Payload).await?;
        let open = |ct: &Option<Vec<u8>>, field| -> Result<Option<String>> {
            match ct {
                Some(ct) => {
                    Ok(Some(String::from_utf8_lossy(&self.ring.open(record.id.as_str(), field, ct)?).into_owned()))
                }
                None => Ok(None),
            }
        };
        let input = open(&record.input_ct, Field::Input)?;
        let result = if record.status() == Status::Completed { open(&record.output_ct, Field::Output)? } else { None };
        Ok(OperatorPayload { record, input, result })
    }

    /// Asks the execution to stop; answers what can be proven, as the owner's cancel does.
    pub(crate) async fn operator_cancel(
        &self,
        authorization: Option<&str>,
        scope: Scope<'_>,
        id: &str,
    ) -> Result<(CancelOutcome, ExecutionRecord)> {
        let (p, record) = self.operator_read(authorization, scope, id, Route::Cancel).await?;
        let answer = match self.request_cancel(record).await {
            Ok(answer) => answer,
            Err(e) => {
                let refused = matches!(e, Error::PolicyRefused(_));
                if refused {
                    self.audit(&p, scope, action::OPERATOR_CANCEL, Some(id), outcome::REFUSED, Some(e.to_string()))
                        .await?;
                }
                return Err(e);
            }
        };
        self.audit(&p, scope, action::OPERATOR_CANCEL, Some(id), answer.0.as_str(), None).await?;
        tracing::info!(execution_id = %id, outcome = ?answer.0, "operator cancel");
        Ok(answer)
    }
}

#[cfg(test)]
mod tests;
