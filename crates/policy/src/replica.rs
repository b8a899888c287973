//! Where a partition's second copy goes: as far from its primary as the cluster allows.
//!
//! A replica is there for the day its primary is gone. A replica on the primary's own
//! machine dies with it, and one in the primary's zone (rack, availability zone) dies with
//! the zone's switch or power. So the replica goes to another zone when one has a live
//! worker, else to another host, else to any other worker. Among the workers at the best
//! distance it rotates with the partition, so that when a worker is lost its partitions
//! fall to several survivors instead of doubling the load of one.

/// A live worker as replica placement sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site<'a> {
    pub id: u32,
    /// The machine (workers on one host fail together).
    pub host: &'a str,
    /// The failure domain; empty for unlabelled workers, which count as one zone.
    pub zone: &'a str,
}

impl Site<'_> {
    /// How far apart two workers fail: 2 in different zones, 1 on different hosts of one
    /// zone, 0 on one host.
    pub fn separation(&self, other: &Site) -> u8 {
        if self.zone != other.zone {
            2
        } else if self.host != other.host {
            1
        } else {
            0
        }
    }
}

/// The replica of the `turn`-th partition of `primary` (its 0th, 1st, ... in the order the
/// caller places them), among `live` (the live workers that may take it, in id order; the
/// primary itself is skipped): the workers farthest from the primary are the candidates,
/// taken in turn starting after the primary's id, so that each worker's partitions
/// spread evenly over them. `None` when no other worker is live.
pub fn replica_for(turn: u32, primary: &Site, live: &[Site]) -> Option<u32> {
    let best = live
        .iter()
        .filter(|s| s.id != primary.id)
        .map(|s| primary.separation(s))
        .max()?;
    // The candidates in cyclic id order starting after the primary, so that without
    // labels partition 0 of every worker's block goes to its next worker.
    let mut candidates: Vec<u32> = live
        .iter()
        .filter(|s| s.id != primary.id && primary.separation(s) == best)
        .map(|s| s.id)
        .collect();
    let after = candidates.partition_point(|&id| id < primary.id);
    candidates.rotate_left(after);
    Some(candidates[turn as usize % candidates.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(id: u32, host: &'static str, zone: &'static str) -> Site<'static> {
        Site { id, host, zone }
    }

    #[test]
    fn a_replica_goes_to_another_zone_when_one_exists() {
        let live = [
            site(0, "a1", "a"),
            site(1, "a2", "a"),
            site(2, "b1", "b"),
            site(3, "b2", "b"),
        ];
        for p in 0..8 {
            let r = replica_for(p, &live[0], &live).unwrap();
            assert!(
                r == 2 || r == 3,
                "partition {p}: replica {r} is in the primary's zone"
            );
            let r = replica_for(p, &live[3], &live).unwrap();
            assert!(
                r == 0 || r == 1,
                "partition {p}: replica {r} is in the primary's zone"
            );
        }
    }

    #[test]
    fn without_another_zone_a_replica_goes_to_another_host() {
        // Two workers share host h1; the third is alone on h2.
        let live = [site(0, "h1", ""), site(1, "h1", ""), site(2, "h2", "")];
        for p in 0..4 {
            assert_eq!(replica_for(p, &live[0], &live), Some(2));
            assert_eq!(replica_for(p, &live[1], &live), Some(2));
        }
        assert!([0, 1].contains(&replica_for(0, &live[2], &live).unwrap()));
    }

    #[test]
    fn on_one_host_any_other_worker_will_do() {
        let live = [site(0, "h", "z"), site(1, "h", "z")];
        assert_eq!(replica_for(0, &live[0], &live), Some(1));
        assert_eq!(replica_for(1, &live[1], &live), Some(0));
        assert_eq!(replica_for(0, &live[0], &live[..1]), None);
        assert_eq!(replica_for(0, &live[0], &[]), None);
    }

    #[test]
    fn replicas_rotate_so_a_lost_worker_falls_to_several() {
        let live: Vec<Site> = ["h0", "h1", "h2", "h3"]
            .iter()
            .enumerate()
            .map(|(i, h)| site(i as u32, h, ""))
            .collect();
        let picks: Vec<u32> = (0..6)
            .map(|p| replica_for(p, &live[1], &live).unwrap())
            .collect();
        // Starting after the primary, in id order, wrapping around.
        assert_eq!(picks, [2, 3, 0, 2, 3, 0]);
    }

    #[test]
    fn a_primary_that_is_not_live_still_gets_a_replica_away_from_it() {
        let live = [site(1, "a2", "a"), site(2, "b1", "b")];
        let gone = site(0, "a1", "a");
        assert_eq!(replica_for(0, &gone, &live), Some(2));
        assert_eq!(replica_for(5, &gone, &live), Some(2));
    }
}
