//! Record -> wire view.

use crate::store::{ExecutionRecord, ToolRecord};
use baton_proto::coordinator::v1 as pb;

pub fn surface(s: &str) -> pb::Surface {
    match s {
        "mcp_native" => pb::Surface::McpNative,
        "mcp_compat" => pb::Surface::McpCompat,
        _ => pb::Surface::Rest,
    }
}

pub fn surface_name(s: i32) -> &'static str {
    match pb::Surface::try_from(s) {
        Ok(pb::Surface::McpNative) => "mcp_native",
        Ok(pb::Surface::McpCompat) => "mcp_compat",
        _ => "rest",
    }
}

pub fn view(r: &ExecutionRecord) -> pb::ExecutionView {
    pb::ExecutionView {
        execution_id: r.id.clone(),
        status: r.status().as_str().to_owned(),
        org_id: r.org_id.clone(),
        project_id: r.project_id.clone(),
        gateway_id: r.gateway_id.clone(),
        tool_name: r.tool_name.clone(),
        toolkit_name: r.toolkit_name.clone(),
        toolkit_version: r.toolkit_version.clone(),
        user_id: r.user_id.clone(),
        surface: surface(&r.surface) as i32,
        execution_type: r.execution_type.clone(),
        created_at_ms: r.created_at,
        scheduled_at_ms: r.scheduled_at,
        started_at_ms: r.started_at,
        finished_at_ms: r.finished_at,
        updated_at_ms: r.updated_at,
        execution_deadline_ms: r.execution_deadline,
        retention_expires_at_ms: r.retention_expires_at,
        poll_interval_ms: r.poll_interval_ms,
        owner_loss_detection_at_ms: r.state.owner_loss_detection_at,
        failure_reason: r.failure_reason().map(|f| f.as_str().to_owned()).unwrap_or_default(),
        error_message: r.error_message.clone().unwrap_or_default(),
        summary: r.summary.clone().unwrap_or_default(),
        input_requests: Vec::new(),
        cancel_state: if r.state.cancel_requested { "requested" } else { "none" }.to_owned(),
    }
}

pub fn tool(t: &ToolRecord) -> pb::ToolDefinition {
    pb::ToolDefinition {
        name: t.name.clone(),
        toolkit_name: t.toolkit_name.clone(),
        toolkit_version: t.toolkit_version.clone(),
        description: t.description.clone(),
        input_schema_json: t.input_schema.clone(),
        background: t.background.clone(),
        task_time_input: t.task_time_input,
        required_client_capabilities: t.required_client_capabilities.clone(),
    }
}
