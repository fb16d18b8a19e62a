//! The global tier's decisions, pure: the member status document ([`status`]), each member's
//! freshness, ejection and return ([`member`]), the settings they read ([`settings`]) and the
//! choice of the members to try for a request ([`choose`]), and the comparison of the members'
//! pool definitions ([`drift`]). The time and a seeded RNG are
//! passed in; the front (`infergate-global-gateway`) does the pulling and the proxying.
#![forbid(unsafe_code)]

pub mod choose;
pub mod drift;
pub mod member;
pub mod settings;
pub mod status;

pub use choose::{
    rank, room_to_eject, Member, Ranked, Refusal, Request, ScoreParts, DEFAULT_RETRY_AFTER,
};
pub use drift::{drift, Definition, Drift};
pub use member::{Availability, MemberState};
pub use settings::TierSettings;
pub use status::{
    MemberStatus, PoolStatus, Readiness, MEMBER_STATUS_API_VERSION, MEMBER_STATUS_KIND,
    MEMBER_STATUS_PATH,
};

#[cfg(test)]
mod tests;
