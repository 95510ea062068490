//! A project's tool definitions as `tools/call` plans with them, kept for a
//! second. Planning a call (foreground or task, which capabilities it needs)
//! needs the definition before anything starts; asking the coordinator each
//! time doubled the coordinator calls of a foreground call. The cache holds
//! no credential and decides nothing alone: a plan made from it only leads to
//! the start, which authenticates the caller and re-reads the tool; a plan it
//! would refuse is made again from definitions fetched with the caller's own
//! credential, so an unauthenticated caller learns nothing from it.

use baton_proto::coordinator::v1::ToolDefinition;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How stale a plan's definitions may be: a tool registered, changed or
/// disabled is planned with its new definition within this.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(1);

/// Projects seen at once before the oldest entries are dropped.
const MAX_PROJECTS: usize = 4_096;

type Defs = Arc<Vec<ToolDefinition>>;

#[derive(Default)]
pub(crate) struct ToolDefs {
    by_project: Mutex<HashMap<(String, String), (Instant, Defs)>>,
}

impl ToolDefs {
    /// The definitions of project (`org_id`, `project_id`) if fetched within [`FRESH_FOR`].
    pub(crate) fn fresh(&self, org_id: &str, project_id: &str) -> Option<Defs> {
        let map = self.by_project.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, defs) = map.get(&(org_id.to_owned(), project_id.to_owned()))?;
        (at.elapsed() < FRESH_FOR).then(|| defs.clone())
    }

    /// Keeps `defs`, just fetched with a caller's credential.
    pub(crate) fn keep(&self, org_id: &str, project_id: &str, defs: Vec<ToolDefinition>) -> Defs {
        let defs = Arc::new(defs);
        let mut map = self.by_project.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_PROJECTS {
            map.retain(|_, (at, _)| at.elapsed() < FRESH_FOR);
        }
        if map.len() < MAX_PROJECTS {
            map.insert((org_id.to_owned(), project_id.to_owned()), (Instant::now(), defs.clone()));
        }
        defs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str) -> ToolDefinition {
        ToolDefinition { name: name.into(), ..Default::default() }
    }

    #[test]
    fn definitions_are_kept_per_project_and_only_while_fresh() {
        let cache = ToolDefs::default();
        assert!(cache.fresh("o", "p").is_none());
        cache.keep("o", "p", vec![def("A")]);
        assert_eq!(cache.fresh("o", "p").map(|d| d[0].name.clone()), Some("A".into()));
        assert!(cache.fresh("o", "q").is_none(), "another project sees nothing");
        let stale = Instant::now().checked_sub(FRESH_FOR).expect("clock");
        cache.by_project.lock().expect("lock").insert(("o".into(), "p".into()), (stale, Arc::new(vec![def("A")])));
        assert!(cache.fresh("o", "p").is_none(), "stale definitions are fetched again");
    }
}
