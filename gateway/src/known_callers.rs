//! What the coordinator last said a credential is (its `WhoAmI`): the org and
//! project it belongs to, the gateway it is bound to, and the principal it
//! names. None of these ever change for a credential; whether it is still
//! good does, and is not kept here. So an MCP call that the coordinator
//! authenticates anyway (`tools/call`, `tasks/*`) of a bearer seen before
//! skips its own `WhoAmI`: one round trip and one credential read fewer per
//! call, with a revoked credential refused by the call itself, on its next
//! request as before. Kept by the bearer's SHA-256, never the bearer.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Credentials remembered at once; past it the memory starts over, which
/// costs each caller one `WhoAmI` again and nothing else.
const MAX_KNOWN: usize = 65_536;

/// A credential's fixed facts, as `WhoAmI` answered them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Known {
    pub(crate) org_id: String,
    pub(crate) project_id: String,
    /// The gateway an end-user token is bound to; empty when it is not bound.
    pub(crate) gateway_id: String,
    /// The principal's hash, as legacy sessions store it.
    pub(crate) principal: String,
}

#[derive(Default)]
pub(crate) struct KnownCallers {
    by_bearer: Mutex<HashMap<[u8; 32], Known>>,
}

fn key(bearer: &str) -> [u8; 32] {
    Sha256::digest(bearer.as_bytes()).into()
}

impl KnownCallers {
    /// What `bearer` was last said to be, if it was.
    pub(crate) fn get(&self, bearer: &str) -> Option<Known> {
        self.by_bearer.lock().unwrap_or_else(PoisonError::into_inner).get(&key(bearer)).cloned()
    }

    /// Remembers what the coordinator just said `bearer` is.
    pub(crate) fn keep(&self, bearer: &str, known: Known) {
        let mut map = self.by_bearer.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_KNOWN {
            map.clear();
        }
        map.insert(key(bearer), known);
    }

    /// Forgets `bearer`: the coordinator refused it.
    pub(crate) fn forget(&self, bearer: &str) {
        self.by_bearer.lock().unwrap_or_else(PoisonError::into_inner).remove(&key(bearer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(project: &str) -> Known {
        Known { org_id: "o".into(), project_id: project.into(), gateway_id: String::new(), principal: "p".into() }
    }

    #[test]
    fn a_bearer_is_known_by_its_hash_until_forgotten_or_the_memory_fills() {
        let callers = KnownCallers::default();
        assert_eq!(callers.get("tok"), None);
        callers.keep("tok", known("p1"));
        assert_eq!(callers.get("tok"), Some(known("p1")));
        assert_eq!(callers.get("tok2"), None, "another bearer is not known by it");
        callers.forget("tok");
        assert_eq!(callers.get("tok"), None);

        for i in 0..MAX_KNOWN {
            callers.keep(&format!("t{i}"), known("p"));
        }
        callers.keep("last", known("p"));
        assert_eq!(callers.get("t0"), None, "a full memory starts over");
        assert_eq!(callers.get("last"), Some(known("p")));
    }
}
