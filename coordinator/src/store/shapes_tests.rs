//! Batches bigger than one statement's rows, and ones padded to a size, are
//! answered exactly as one read or transition each would be, in order.

use super::contract_tests::{backends, new_execution};
use super::{CredentialKind, EventData, NewCredential};
use crate::domain::Event;

const N: usize = 70; // more than one statement's rows (shapes::MAX_ROWS)

#[tokio::test]
async fn batches_across_statements_answer_in_order() {
    for b in backends().await {
        b.store.create_org("org_1", "Org", 1).await.expect("org");
        b.store.create_project("p1", "org_1", "Project", 1).await.expect("project");
        let credential = NewCredential {
            id: "cred_a".into(),
            token_hash: vec![7; 32],
            kind: CredentialKind::ApiKey,
            org_id: "org_1".into(),
            project_id: "p1".into(),
            gateway_id: None,
            user_id: None,
            role: Some("admin".into()),
            permissions: vec!["status".into()],
            worker_group: None,
        };
        b.store.create_credential(&credential, 1).await.expect("credential");
        let mut ids = Vec::new();
        for i in 0..N {
            let new = new_execution("p1", "u1", None, "f", 1_000 + i as i64);
            ids.push(b.store.create_execution(&new).await.expect("create").record.id);
        }
        // Every third ask names no execution, every fifth an unknown token.
        let asks: Vec<(Option<&[u8]>, &str)> = (0..N)
            .map(|i| {
                let hash: Option<&[u8]> = if i % 5 == 0 { Some(&[8; 32]) } else { Some(&[7; 32]) };
                (hash, if i % 3 == 0 { "te_unknown" } else { ids[i].as_str() })
            })
            .collect();
        let found = b.store.credentials_with_executions(&asks).await.expect("reads");
        assert_eq!(found.len(), N, "{}", b.name);
        for (i, (credential, execution)) in found.iter().enumerate() {
            assert_eq!(credential.is_some(), i % 5 != 0, "{}: ask {i}'s credential", b.name);
            let want = (i % 3 != 0).then_some(ids[i].as_str());
            assert_eq!(execution.as_ref().map(|e| e.id.as_str()), want, "{}: ask {i}'s execution", b.name);
        }
        let starts: Vec<(&[u8], &str, &str)> =
            (0..N).map(|i| (if i % 2 == 0 { &[7u8; 32][..] } else { &[9u8; 32][..] }, "p1", "Demo.Echo")).collect();
        let answers = b.store.credentials_with_tools(&starts).await.expect("starts");
        let known: Vec<bool> = answers.iter().map(Option::is_some).collect();
        assert_eq!(known, (0..N).map(|i| i % 2 == 0).collect::<Vec<_>>(), "{}", b.name);

        // One transition each, in a batch that spans statements; the batch
        // names the last execution twice, and the second comes after the
        // first (so a second claim is ignored).
        let claim = |id: &String| {
            let event = Event::Claim { worker_id: "w1".into(), lease_until: 90_000 };
            (id.clone(), event, EventData::default())
        };
        let mut items: Vec<_> = ids.iter().map(claim).collect();
        items.push(claim(&ids[N - 1]));
        let answers = b.store.apply_batch(&items, 5_000).await.expect("batch");
        for (i, answer) in answers.iter().take(N).enumerate() {
            let applied = answer.as_ref().and_then(|a| a.as_ref().ok()).expect("claimed");
            assert_eq!(applied.record.id, ids[i], "{}", b.name);
            assert_eq!(applied.record.state.attempts, 1, "{}", b.name);
        }
        assert!(matches!(answers[N], Some(Err(_))), "{}: the repeated claim is ignored", b.name);
    }
}
