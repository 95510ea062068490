//! Configuration errors stop a role before it binds a port, with exit code 64
//! and a message naming the field.

use crate::harness::baton_bin;
use tokio::process::Command;

pub(crate) async fn run_with(yaml: &str) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("baton-cfg-{}", crate::harness::random_suffix()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("bad.yaml");
    std::fs::write(&path, yaml).expect("write");
    let out = Command::new(baton_bin())
        .arg("coordinator")
        .arg("--config")
        .arg(&path)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .output()
        .await
        .expect("run baton");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test]
async fn a_zero_backlog_with_native_tasks_exits_64_naming_the_field() {
    let (code, stderr) = run_with(
        "features:\n  native_mcp_tasks: true\n  mcp_tasks_principal_concurrency: 20\n  mcp_tasks_project_concurrency: 40\n  \
         mcp_tasks_organization_concurrency: 80\n  mcp_tasks_backlog: 0\n  mcp_tasks_retained_payload_bytes: 1048576\n",
    )
    .await;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("mcp_tasks_backlog"), "{stderr}");
}

#[tokio::test]
async fn unknown_fields_and_missing_keys_exit_64() {
    let (code, stderr) = run_with("featurez: {}\n").await;
    assert_eq!(code, Some(64));
    assert!(stderr.contains("featurez"), "{stderr}");
    let (code, stderr) = run_with("database:\n  url: postgres://127.0.0.1/x\n").await;
    assert_eq!(code, Some(64));
    assert!(stderr.contains("execution_payload_keys"), "{stderr}");
}

#[tokio::test]
async fn an_unreadable_tls_file_exits_64_naming_the_field() {
    let missing = std::env::temp_dir().join(format!("baton-absent-{}.pem", crate::harness::random_suffix()));
    let (code, stderr) = run_with(&format!("tls:\n  ca_file: {}\n", missing.display())).await;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("tls.ca_file"), "{stderr}");
    let (code, stderr) = run_with("tls:\n  client_ca_file: /dev/null\n").await;
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("tls.client_ca_file"), "{stderr}");
}
