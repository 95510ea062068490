//! A breadth-first explicit-state model checker: every state reachable from
//! the initial ones, each visited once (by a 64-bit fingerprint, as TLC keeps
//! them), every `always` property checked in each, every `sometimes` property
//! required somewhere. A violation comes back as the shortest trace of
//! actions that reaches it, rebuilt by replaying the recorded choices.

use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::{Hash, Hasher};

pub trait Model {
    type State: Clone + Eq + Hash + Debug;
    type Action: Clone + Debug;

    fn init(&self) -> Vec<Self::State>;
    /// The actions enabled in `s`, in a fixed order (traces name them by index).
    fn actions(&self, s: &Self::State) -> Vec<Self::Action>;
    /// The state `a` leads to; None when it changes nothing.
    fn next(&self, s: &Self::State, a: &Self::Action) -> Option<Self::State>;
    fn always(&self) -> Vec<Property<Self::State>>;
    fn sometimes(&self) -> Vec<Property<Self::State>>;
}

pub struct Property<S> {
    pub name: &'static str,
    pub holds: fn(&S) -> bool,
}

#[derive(Debug)]
pub struct Counterexample<S, A> {
    pub property: &'static str,
    /// From an initial state: each action and the state it led to.
    pub trace: Vec<(A, S)>,
    pub first: S,
}

#[derive(Debug)]
pub struct Report<S, A> {
    /// Unique states visited.
    pub states: usize,
    /// Longest shortest path from an initial state.
    pub depth: usize,
    /// Every reachable state was visited (no cap reached, no violation).
    pub complete: bool,
    pub violation: Option<Counterexample<S, A>>,
    /// `sometimes` properties never seen to hold.
    pub never: Vec<&'static str>,
}

fn fingerprint<S: Hash>(s: &S) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

const ROOT: u32 = u32::MAX;

/// Explores `m` breadth first, up to `max_states` unique states; stops at the
/// first violated `always` property.
pub fn check<M: Model>(m: &M, max_states: usize) -> Report<M::State, M::Action> {
    check_only(m, max_states, None)
}

/// As `check`, holding only the `always` property named `only` when given.
pub fn check_only<M: Model>(m: &M, max_states: usize, only: Option<&str>) -> Report<M::State, M::Action> {
    let always: Vec<_> = m.always().into_iter().filter(|p| only.is_none_or(|name| p.name == name)).collect();
    let sometimes = m.sometimes();
    let mut seen_sometimes = vec![false; sometimes.len()];
    let mut index: HashMap<u64, u32> = HashMap::new();
    // (parent, index of the action in the parent's `actions`), per state.
    let mut parents: Vec<(u32, u32)> = Vec::new();
    let mut depths: Vec<u32> = Vec::new();
    let mut queue: VecDeque<(u32, M::State)> = VecDeque::new();
    let inits = m.init();
    for (i, s) in inits.iter().enumerate() {
        if index.insert(fingerprint(s), parents.len() as u32).is_none() {
            parents.push((ROOT, i as u32));
            depths.push(0);
            queue.push_back((parents.len() as u32 - 1, s.clone()));
        }
    }
    let mut capped = false;
    while let Some((id, s)) = queue.pop_front() {
        for (k, p) in sometimes.iter().enumerate() {
            if !seen_sometimes[k] && (p.holds)(&s) {
                seen_sometimes[k] = true;
            }
        }
        if let Some(p) = always.iter().find(|p| !(p.holds)(&s)) {
            let violation = Some(replay(m, &inits, &parents, id, p.name));
            return Report {
                states: parents.len(),
                depth: depth_of(&depths),
                complete: false,
                violation,
                never: vec![],
            };
        }
        for (ai, a) in m.actions(&s).iter().enumerate() {
            let Some(n) = m.next(&s, a) else { continue };
            let fp = fingerprint(&n);
            if index.contains_key(&fp) {
                continue;
            }
            if parents.len() >= max_states {
                capped = true;
                continue;
            }
            let nid = parents.len() as u32;
            index.insert(fp, nid);
            parents.push((id, ai as u32));
            depths.push(depths[id as usize] + 1);
            queue.push_back((nid, n));
        }
    }
    let never = sometimes.iter().zip(&seen_sometimes).filter(|(_, seen)| !**seen).map(|(p, _)| p.name).collect();
    Report { states: parents.len(), depth: depth_of(&depths), complete: !capped, violation: None, never }
}

fn depth_of(depths: &[u32]) -> usize {
    depths.iter().copied().max().unwrap_or(0) as usize
}

/// The path to state `id`, replayed from its initial state.
fn replay<M: Model>(
    m: &M,
    inits: &[M::State],
    parents: &[(u32, u32)],
    id: u32,
    property: &'static str,
) -> Counterexample<M::State, M::Action> {
    let mut choices = Vec::new();
    let mut at = id;
    while parents[at as usize].0 != ROOT {
        let (parent, action) = parents[at as usize];
        choices.push(action as usize);
        at = parent;
    }
    let first = inits[parents[at as usize].1 as usize].clone();
    let mut s = first.clone();
    let mut trace = Vec::new();
    for choice in choices.into_iter().rev() {
        let Some(a) = m.actions(&s).get(choice).cloned() else { break };
        let Some(n) = m.next(&s, &a) else { break };
        trace.push((a, n.clone()));
        s = n;
    }
    Counterexample { property, trace, first }
}

impl<S: Debug, A: Debug> Counterexample<S, A> {
    /// One line per step: what happened, then the state it left.
    pub fn render(&self) -> String {
        let mut out = format!("counterexample to `{}`:\n  start: {:?}\n", self.property, self.first);
        for (i, (a, s)) in self.trace.iter().enumerate() {
            out.push_str(&format!("  {:>2}. {a:?}\n      → {s:?}\n", i + 1));
        }
        out
    }
}
