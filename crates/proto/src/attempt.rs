//! Attempt ids: which run of a map task wrote a batch or a commit.

use std::fmt;

use bytes::BufMut;
use serde::{Deserialize, Serialize};

use crate::codec::{Reader, Wire};
use crate::error::DecodeError;

/// One run of a map task: `(stage attempt << 16) | task attempt`, as the engine client
/// numbers them. Within a *generation* (the stage attempt, the high 16 bits) the first
/// attempt to commit wins and the others are ignored; a commit of a later generation
/// (a rerun of the whole stage) replaces the earlier one, so a rerun indeterminate stage
/// never mixes its output with the old one. On the wire it is a `u32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AttemptId(pub u32);

impl AttemptId {
    /// No attempt: a map that has not committed (in lists of committed attempts) or a
    /// revocation (in `MapCommitted`). Reserved: no attempt has this id.
    pub const NONE: AttemptId = AttemptId(u32::MAX);

    /// The attempt `task_attempt` of a task in stage attempt `stage_attempt`.
    pub fn new(stage_attempt: u16, task_attempt: u16) -> AttemptId {
        AttemptId(((stage_attempt as u32) << 16) | task_attempt as u32)
    }

    /// The stage attempt this attempt belongs to.
    pub fn generation(self) -> u32 {
        self.0 >> 16
    }

    /// True for [`AttemptId::NONE`].
    pub fn is_none(self) -> bool {
        self == AttemptId::NONE
    }

    /// `Some(self)`, or `None` for [`AttemptId::NONE`].
    pub fn some(self) -> Option<AttemptId> {
        (!self.is_none()).then_some(self)
    }
}

impl From<u32> for AttemptId {
    fn from(v: u32) -> Self {
        AttemptId(v)
    }
}

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_none() {
            f.write_str("none")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl Wire for AttemptId {
    const MIN_LEN: usize = 4;
    fn put(&self, b: &mut impl BufMut) {
        b.put_u32(self.0);
    }
    fn get(r: &mut Reader, field: &'static str) -> Result<Self, DecodeError> {
        r.u32(field).map(AttemptId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_order_stage_reruns() {
        let first = AttemptId::new(0, 3);
        let rerun = AttemptId::new(1, 0);
        assert_eq!(first.generation(), 0);
        assert_eq!(rerun.generation(), 1);
        assert_eq!(rerun.0, 1 << 16);
        assert!(AttemptId::NONE.is_none() && AttemptId::NONE.some().is_none());
        assert_eq!(first.some(), Some(first));
        assert_eq!(AttemptId::NONE.to_string(), "none");
    }
}
