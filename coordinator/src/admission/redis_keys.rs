//! Where Redis admission keeps its state: the key layout.
//!
//! Every key of one admission decision carries the same hash tag, so a Redis
//! Cluster keeps them in one slot and one Lua script may touch them all. The
//! tag is the organization's shard (`{s17}`), not the organization itself: an
//! organization's bounds (its principals, projects, backlogs and retained
//! bytes all belong to it) stay in one slot, and the state a loss must be
//! detected and rebuilt in (the epoch, the rebuild lock, the index of keys)
//! has a fixed number of copies, one per shard, already there when a new
//! organization arrives.
//!
//! ```text
//! <prefix>:adm:{s<n>}:principal:<project>:<user>   open executions of one principal (zset)
//! <prefix>:adm:{s<n>}:project:<project>            … of one project
//! <prefix>:adm:{s<n>}:org:<org>                    … of one organization
//! <prefix>:adm:{s<n>}:backlog:<project>            admitted, not yet started
//! <prefix>:adm:{s<n>}:retained-{due,total,open,hour}:<project>
//! <prefix>:adm:{s<n>}:e:<execution>                one admission's meta / tombstone
//! <prefix>:adm:{s<n>}:{epoch,epoch-run,rebuild-lock,keys}
//! ```

use super::Ticket;

/// How many hash tags admission spreads over. Enough that a cluster's masters
/// share the organizations evenly; few enough that checking every shard's
/// epoch stays cheap.
pub const SHARDS: u32 = 64;

/// The shard of an organization: FNV-1a of its id, so every replica and every
/// version agrees without configuration.
pub fn shard_of(org_id: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in org_id.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % SHARDS
}

/// The keys of one shard.
#[derive(Clone, Debug)]
pub(crate) struct Shard {
    base: String,
}

/// The scope sets a rebuild prunes, by the name their key carries.
pub(crate) const SCOPE_SETS: [&str; 4] = ["principal", "project", "org", "backlog"];

impl Shard {
    pub(crate) fn new(prefix: &str, n: u32) -> Shard {
        Shard { base: format!("{prefix}:adm:{{s{n}}}") }
    }

    /// The keys a decision about `t` reads and writes, in the order the
    /// scripts name them (`redis_scripts::OPS`): 1 principal, 2 project,
    /// 3 org, 4 backlog, 5..7 retained due/total/open, 8 meta, 9 retained hour.
    pub(crate) fn ticket_keys(&self, t: &Ticket) -> [String; 9] {
        let b = &self.base;
        let [due, total, open, hour] = self.retained(&t.project_id);
        [
            format!("{b}:principal:{}:{}", t.project_id, t.user_id),
            format!("{b}:project:{}", t.project_id),
            format!("{b}:org:{}", t.org_id),
            self.backlog(&t.project_id),
            due,
            total,
            open,
            self.meta(&t.execution_id),
            hour,
        ]
    }

    /// The executions of a project admitted and not yet started.
    pub(crate) fn backlog(&self, project_id: &str) -> String {
        format!("{}:backlog:{project_id}", self.base)
    }

    /// A project's retained bytes: the retention hours still counted (a set
    /// scored by the hour), the total, the bytes each open execution holds,
    /// and the bytes per hour.
    pub(crate) fn retained(&self, project_id: &str) -> [String; 4] {
        let b = &self.base;
        ["due", "total", "open", "hour"].map(|k| format!("{b}:retained-{k}:{project_id}"))
    }

    pub(crate) fn meta(&self, execution_id: &str) -> String {
        format!("{}:e:{execution_id}", self.base)
    }

    pub(crate) fn epoch(&self) -> String {
        format!("{}:epoch", self.base)
    }

    pub(crate) fn epoch_run(&self) -> String {
        format!("{}:epoch-run", self.base)
    }

    pub(crate) fn lock(&self) -> String {
        format!("{}:rebuild-lock", self.base)
    }

    /// The index of the shard's scope sets and retained keys: a cluster has
    /// no key scan across nodes, and a rebuild must find members no open
    /// execution names any more.
    pub(crate) fn index(&self) -> String {
        format!("{}:keys", self.base)
    }

    /// The project whose retained total `key` is, if it is one.
    pub(crate) fn project_of_total<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(self.base.as_str())?.strip_prefix(":retained-total:")
    }

    /// Whether `key` is one of the scope sets (`SCOPE_SETS`).
    pub(crate) fn is_scope_set(&self, key: &str) -> bool {
        key.strip_prefix(self.base.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
            .is_some_and(|rest| SCOPE_SETS.iter().any(|s| rest.strip_prefix(s).is_some_and(|r| r.starts_with(':'))))
    }

    /// Whether `key` holds what each open execution of a project holds.
    pub(crate) fn is_retained_open(&self, key: &str) -> bool {
        key.strip_prefix(self.base.as_str()).is_some_and(|rest| rest.starts_with(":retained-open:"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_tag(key: &str) -> &str {
        // Redis Cluster hashes the text between the first '{' and the next '}'.
        let open = key.find('{').expect("a tag");
        let close = key[open..].find('}').expect("closed") + open;
        &key[open + 1..close]
    }

    #[test]
    fn every_key_of_a_decision_shares_one_hash_tag() {
        let t = Ticket {
            execution_id: "ex_1".into(),
            org_id: "org_a".into(),
            project_id: "prj_{x}".into(),
            user_id: "usr_1".into(),
            payload_bytes: 1,
            expires_at_ms: 0,
            retained_until_ms: 0,
        };
        let shard = Shard::new("baton", shard_of(&t.org_id));
        let mut keys: Vec<String> = shard.ticket_keys(&t).into();
        keys.extend([shard.epoch(), shard.epoch_run(), shard.lock(), shard.index()]);
        let tag = format!("s{}", shard_of("org_a"));
        for k in &keys {
            assert_eq!(slot_tag(k), tag, "{k}");
        }
    }

    #[test]
    fn organizations_spread_over_the_shards() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..1_000 {
            seen.insert(shard_of(&format!("org_{i}")));
        }
        assert_eq!(seen.len(), SHARDS as usize);
        assert_eq!(shard_of("org_a"), shard_of("org_a"));
    }

    #[test]
    fn keys_are_told_apart_by_kind() {
        let s = Shard::new("baton", 3);
        assert!(s.is_scope_set("baton:adm:{s3}:principal:p:u"));
        assert!(s.is_scope_set("baton:adm:{s3}:org:o"));
        assert!(!s.is_scope_set("baton:adm:{s3}:retained-open:p"));
        assert!(!s.is_scope_set("baton:adm:{s4}:org:o"));
        assert!(s.is_retained_open("baton:adm:{s3}:retained-open:p"));
        assert_eq!(s.project_of_total("baton:adm:{s3}:retained-total:prj_1"), Some("prj_1"));
        assert_eq!(s.project_of_total("baton:adm:{s3}:retained-open:prj_1"), None);
    }
}
