use super::*;
use std::time::Duration;

fn demand(name: &str, running: u32, waiting: u32, share: u32) -> Demand {
    Demand {
        name: name.into(),
        cap: 50,
        running,
        waiting,
        share,
        in_force: share,
        idle: Duration::ZERO,
    }
}

fn shares(allocation: &Allocation) -> Vec<u32> {
    allocation.shares.values().copied().collect()
}

#[test]
fn shares_follow_the_rules() {
    let cases: Vec<(&str, u32, Vec<Demand>, Vec<u32>)> = vec![
        (
            "a burst in three namespaces shares the budget max-min, leftover to the first",
            4,
            vec![
                demand("a", 0, 5, 1),
                demand("b", 0, 3, 1),
                demand("c", 0, 2, 1),
            ],
            vec![2, 1, 1],
        ),
        (
            "a namespace wanting less than its level leaves the rest to the others",
            10,
            vec![
                demand("a", 0, 20, 1),
                demand("b", 1, 0, 1),
                demand("c", 0, 20, 1),
            ],
            vec![5, 1, 4],
        ),
        (
            "without contention each gets what it has live",
            100,
            vec![demand("a", 2, 3, 1), demand("b", 0, 7, 1)],
            vec![5, 7],
        ),
        (
            "an idle namespace keeps its share while no one waits: no write",
            4,
            vec![demand("a", 0, 0, 3), demand("b", 1, 0, 1)],
            vec![3, 1],
        ),
        (
            "an idle namespace gives its share back after a while, so it sleeps without one",
            4,
            vec![
                Demand {
                    idle: RELEASE_AFTER,
                    ..demand("a", 0, 0, 3)
                },
                demand("b", 1, 0, 1),
            ],
            vec![1, 1],
        ),
        (
            "an idle namespace's share goes back to one that starves: granted once applied",
            4,
            vec![demand("a", 0, 0, 3), demand("b", 1, 4, 1)],
            vec![1, 1],
        ),
        (
            "an idle namespace's share given back and applied goes to one that starves",
            4,
            vec![
                Demand {
                    in_force: 1,
                    ..demand("a", 0, 0, 1)
                },
                demand("b", 1, 4, 1),
            ],
            vec![1, 4],
        ),
        (
            "a lowered share frees only what its namespace does not run",
            4,
            vec![demand("a", 4, 4, 4), demand("b", 0, 4, 1)],
            vec![2, 1],
        ),
        (
            "a share lowered but refused by the API server holds what is in force: nothing freed",
            4,
            vec![
                Demand {
                    in_force: 4,
                    ..demand("a", 2, 4, 2)
                },
                demand("b", 1, 4, 1),
            ],
            vec![2, 1],
        ),
        (
            "an idle controller with a share in force holds it until it is given back",
            4,
            vec![
                Demand {
                    in_force: 3,
                    ..demand("a", 0, 0, 1)
                },
                demand("b", 1, 4, 1),
            ],
            vec![1, 1],
        ),
        (
            "each active namespace keeps at least the floor, beyond the budget",
            2,
            vec![
                demand("a", 1, 0, 1),
                demand("b", 1, 0, 1),
                demand("c", 0, 1, 1),
            ],
            vec![1, 1, 1],
        ),
        (
            "a budget that shrank takes back from those above their fair share",
            4,
            vec![demand("a", 2, 0, 6), demand("b", 2, 0, 6)],
            vec![2, 2],
        ),
    ];
    for (what, budget, demands, want) in cases {
        assert_eq!(shares(&allocate(budget, &demands)), want, "{what}");
    }
}

#[test]
fn a_share_never_exceeds_the_namespaces_own_parallelism() {
    let mut capped = demand("a", 0, 10, 1);
    capped.cap = 2;
    let allocation = allocate(10, &[capped, demand("b", 0, 10, 1)]);
    assert_eq!(shares(&allocation), vec![2, 8]);
    let mut lowered = demand("a", 0, 0, 9);
    lowered.cap = 3;
    assert_eq!(shares(&allocate(10, &[lowered])), vec![3]);
}

#[test]
fn usage_counts_what_runs_waits_and_is_held() {
    let allocation = allocate(4, &[demand("a", 3, 2, 3), demand("b", 0, 0, 1)]);
    assert_eq!(
        allocation.usage,
        Usage {
            budget: 4,
            running: 3,
            waiting: 2,
            held: 4
        }
    );
}

/// xorshift: random fleets, reproducible.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(n)) as u32
    }
}

/// Over random fleets, stepped as the controllers would step them (a share given is applied, or
/// now and then refused; each controller starts what the share in force allows; some Workflows
/// end, some arrive): a share is raised only from budget no one holds, so what is held exceeds
/// the budget by at most the active namespaces at the floor; and the shares come to rest.
#[test]
fn random_fleets_keep_the_guarantee_and_make_no_writes_when_steady() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..300 {
        let budget = 1 + rng.below(12);
        let mut fleet: Vec<Demand> = (0..1 + rng.below(6))
            .map(|i| Demand {
                name: format!("ns-{i}"),
                cap: 1 + rng.below(8),
                running: 0,
                waiting: rng.below(5),
                share: FLOOR,
                in_force: FLOOR,
                idle: Duration::ZERO,
            })
            .collect();
        for _ in 0..20 {
            let allocation = allocate(budget, &fleet);
            let raised = fleet.iter().any(|d| allocation.shares[&d.name] > d.share);
            if raised {
                assert!(
                    allocation.usage.held <= budget,
                    "{fleet:?} -> {allocation:?}"
                );
            }
            let at_floor = fleet
                .iter()
                .filter(|d| d.live() > 0 && allocation.shares[&d.name] == FLOOR)
                .count() as u32;
            assert!(
                allocation.usage.held <= budget + at_floor,
                "{fleet:?} -> {allocation:?}"
            );
            for d in &mut fleet {
                d.share = allocation.shares[&d.name];
            }
            assert_steady_once_applied(budget, &fleet);
            for d in fleet.iter_mut().filter(|_| rng.below(4) > 0) {
                d.in_force = d.share;
            }
            // The controllers start what the share in force allows; some end, some arrive.
            for d in &mut fleet {
                let start = d.in_force.saturating_sub(d.running).min(d.waiting);
                d.running += start;
                d.waiting -= start;
                d.running -= rng.below(d.running + 1);
                d.waiting += rng.below(3);
            }
        }
    }
}

/// With nothing else changing, the shares applied and taken again come to rest: a share given
/// back is granted in the turn after it is applied, and nothing moves after that.
fn assert_steady_once_applied(budget: u32, fleet: &[Demand]) {
    let mut steady = fleet.to_vec();
    for turn in 0.. {
        for d in &mut steady {
            d.in_force = d.share;
        }
        let again = allocate(budget, &steady);
        if steady.iter().all(|d| again.shares[&d.name] == d.share) {
            return;
        }
        assert!(
            turn < 2,
            "still moving after {turn} turns: {steady:?} -> {again:?}"
        );
        for d in &mut steady {
            d.share = again.shares[&d.name];
        }
    }
}

/// A namespace that waits below its fair share gets it once the others' Workflows end: with
/// everyone's running Workflows ending each round, no namespace starves for more than one.
#[test]
fn a_waiting_namespace_reaches_its_fair_share_as_the_others_end() {
    let mut fleet = vec![demand("a", 4, 10, 4), demand("b", 0, 10, 1)];
    let first = allocate(4, &fleet);
    assert_eq!(shares(&first), vec![2, 1], "b waits for what a runs");
    fleet[0].share = 2;
    fleet[0].in_force = 2;
    fleet[0].running = 2;
    let second = allocate(4, &fleet);
    assert_eq!(shares(&second), vec![2, 2]);
}
