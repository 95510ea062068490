//! Admission across a Redis loss: clients admitted by Redis, then inserting
//! their row under the admission generation (the fence, store/fence.rs);
//! Redis losing everything or its last writes (a restart from a snapshot, a
//! failover) and a coordinator rebuilding it from the open rows: moving the
//! generation on, reading the rows, publishing the count and the epoch.
//! Admissions while the epoch is missing are refused (503).

use crate::checker::{Model, Property};

#[derive(Clone, Copy, Debug)]
pub struct AdmissionModel {
    pub clients: u8,
    pub losses: u8,
    /// The mutant inserts a row whatever generation it was admitted under.
    pub no_fence: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    Idle,
    /// Admitted by Redis under this generation; the row is not inserted yet.
    Admitted(u8),
    /// Its row is open.
    Open,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rebuild {
    Idle,
    /// The generation has moved on; the open rows are read next.
    Advanced,
    /// The open rows as read (a bit set of clients).
    Read(u16),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Adm {
    pub clients: Vec<Client>,
    /// Who Redis counts (a bit set), and the epoch it holds (None: lost).
    pub redis: u16,
    pub epoch: Option<u8>,
    /// Postgres' admission generation.
    pub generation: u8,
    pub rebuild: Rebuild,
    pub losses: u8,
    /// The most rows ever open at once.
    pub peak_open: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmAction {
    Admit(u8),
    Insert(u8),
    Finish(u8),
    /// Redis comes back empty.
    LoseAll,
    /// Redis comes back without the last admission (a snapshot, a failover):
    /// the epoch is there but names another server run, so it counts as lost.
    LoseLast(u8),
    Advance,
    ReadOpen,
    Publish,
}

impl Adm {
    fn open(&self) -> u8 {
        self.clients.iter().filter(|c| **c == Client::Open).count() as u8
    }
}

impl Model for AdmissionModel {
    type State = Adm;
    type Action = AdmAction;

    fn init(&self) -> Vec<Adm> {
        vec![Adm {
            clients: vec![Client::Idle; self.clients as usize],
            redis: 0,
            epoch: Some(0),
            generation: 0,
            rebuild: Rebuild::Idle,
            losses: self.losses,
            peak_open: 0,
        }]
    }

    fn actions(&self, s: &Adm) -> Vec<AdmAction> {
        let mut out = Vec::new();
        for (i, c) in s.clients.iter().enumerate() {
            let i = i as u8;
            match c {
                Client::Idle => out.push(AdmAction::Admit(i)),
                Client::Admitted(_) => out.push(AdmAction::Insert(i)),
                Client::Open => out.push(AdmAction::Finish(i)),
                Client::Done => {}
            }
            if s.losses > 0 && s.redis & (1 << i) != 0 {
                out.push(AdmAction::LoseLast(i));
            }
        }
        if s.losses > 0 {
            out.push(AdmAction::LoseAll);
        }
        match s.rebuild {
            Rebuild::Idle if s.epoch.is_none() => out.push(AdmAction::Advance),
            Rebuild::Advanced => out.push(AdmAction::ReadOpen),
            Rebuild::Read(_) => out.push(AdmAction::Publish),
            Rebuild::Idle => {}
        }
        out
    }

    fn next(&self, s: &Adm, a: &AdmAction) -> Option<Adm> {
        let mut n = s.clone();
        match *a {
            AdmAction::Admit(i) => {
                let epoch = s.epoch?;
                if s.redis.count_ones() >= u32::from(BOUND) {
                    return None;
                }
                n.redis |= 1 << i;
                n.clients[i as usize] = Client::Admitted(epoch);
            }
            AdmAction::Insert(i) => {
                let Client::Admitted(generation) = s.clients[i as usize] else { return None };
                if generation == s.generation || self.no_fence {
                    n.clients[i as usize] = Client::Open;
                } else {
                    // StaleAdmission: nothing written, the place given back; the client retries.
                    n.clients[i as usize] = Client::Idle;
                    n.redis &= !(1 << i);
                }
            }
            AdmAction::Finish(i) => {
                n.clients[i as usize] = Client::Done;
                n.redis &= !(1 << i);
            }
            AdmAction::LoseAll => {
                n.losses -= 1;
                n.redis = 0;
                n.epoch = None;
                // A rebuild under way loses its lock: it writes nothing more.
                n.rebuild = Rebuild::Idle;
            }
            AdmAction::LoseLast(i) => {
                n.losses -= 1;
                n.redis &= !(1 << i);
                n.epoch = None;
                n.rebuild = Rebuild::Idle;
            }
            AdmAction::Advance => {
                // Waits for every insert holding the fence: inserts are atomic here.
                n.generation = n.generation.checked_add(1)?;
                n.rebuild = Rebuild::Advanced;
            }
            AdmAction::ReadOpen => {
                let open = s.clients.iter().enumerate().filter(|(_, c)| **c == Client::Open);
                n.rebuild = Rebuild::Read(open.fold(0, |bits, (i, _)| bits | (1 << i)));
            }
            AdmAction::Publish => {
                let Rebuild::Read(open) = s.rebuild else { return None };
                n.redis = open;
                n.epoch = Some(s.generation);
                n.rebuild = Rebuild::Idle;
            }
        }
        n.peak_open = n.peak_open.max(n.open());
        (n != *s).then_some(n)
    }

    fn always(&self) -> Vec<Property<Adm>> {
        vec![Property { name: "admitted work never exceeds a bound", holds: bound_holds }]
    }

    fn sometimes(&self) -> Vec<Property<Adm>> {
        vec![
            Property { name: "the bound is reached", holds: |s| s.peak_open >= 1 && s.redis.count_ones() >= 1 },
            Property { name: "a loss is rebuilt", holds: |s| s.generation > 0 && s.epoch == Some(s.generation) },
            Property { name: "every client is served", holds: |s| s.clients.iter().all(|c| *c == Client::Done) },
        ]
    }
}

/// The organization's bound in this model: one open execution.
pub const BOUND: u8 = 1;

fn bound_holds(s: &Adm) -> bool {
    s.open() <= BOUND
}
