//! Authentication with the cluster key: an HMAC-SHA256 trailer carrying a key id, a
//! timestamp and a nonce, checked against a time window and a bounded replay cache.
//!
//! [`Authenticator`] is pure: it reads no clock and draws no randomness; the caller passes
//! `now_ms` (milliseconds since the Unix epoch) and the [`Nonce`]. It seals and opens frames
//! ([`Authenticator::seal`], [`Authenticator::open`]) and arbitrary byte strings
//! ([`Authenticator::seal_bytes`], [`Authenticator::open_bytes`]) for transports with their
//! own framing (LIM datagrams, the DLM header). It never decides what to do with a failure:
//! it names it, and the transport drops the connection or datagram.
//!
//! # Trailer layout
//! The trailer follows the payload, so a frame's header `length` counts payload + trailer and
//! the 20-byte header keeps its LavaLite layout. [`TRAILER_BYTES`] = 60, big-endian:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0  | 4  | key id ([`KeyId`]) of the key that sealed it |
//! | 4  | 8  | timestamp, ms since the Unix epoch |
//! | 12 | 16 | nonce (random) |
//! | 28 | 32 | HMAC-SHA256 |
//!
//! The MAC is HMAC-SHA256(key, domain label ‖ message ‖ trailer bytes 0..28). For a frame the
//! message is the 20-byte header (with its final `length`) followed by the payload; for
//! `seal_bytes` it is the caller's bytes. The domain labels differ for frames, raw bytes and
//! credentials, so a MAC made for one can never be presented as another.
//!
//! # Checks, in order
//! 1. The body holds a whole trailer, else [`AuthError::Malformed`].
//! 2. The key id is the current or the other key of the [`KeyRing`], else [`AuthError::UnknownKey`].
//! 3. The MAC matches, compared in constant time, else [`AuthError::BadMac`]. Nothing is
//!    interpreted further before this point.
//! 4. The timestamp is within `window_ms` of `now_ms` either way, else [`AuthError::Stale`]
//!    or [`AuthError::Future`].
//! 5. The (timestamp, nonce) pair was not accepted before, else [`AuthError::Replay`].
//!
//! # Replay cache
//! Accepted (timestamp, nonce) pairs are kept, ordered by timestamp, until their timestamp
//! falls out of the window: after that, step 4 refuses them anyway. The MAC binds the
//! timestamp to the nonce, so keying the cache by both is as strict as keying it by nonce.
//! Only authenticated messages enter it, so a party without the key cannot fill it. It holds
//! at most `replay_entries_max` pairs; when full, a new message is refused with
//! [`AuthError::ReplayCacheFull`] rather than forgetting a pair that could then be replayed.
//! Pairs leave only by expiry, and the cache remembers the oldest timestamp it can still
//! vouch for: should the clock step back, older messages are refused as stale.
//! The cache is shared by every connection of an [`Authenticator`] (a frame captured on
//! one connection cannot be replayed on another), behind a mutex held only for the lookup.
//!
//! # One user cannot exhaust it for the others
//! Daemons' messages (frames and sealed bytes) and users' credentials are remembered in two
//! caches of their own, so no number of credentials can make a daemon's frame wait or be
//! refused. Within the credential cache, each user (uid at the issuing host, read from the
//! authenticated token) may hold at most `replay_entries_per_user_max` pairs once the cache is
//! half full: a user beyond it is then refused with [`AuthError::ReplayQuotaFull`] while every
//! other user goes on ([`Authenticator::remember_credential`]); alone, a user may fill half
//! the cache (with the default bound, 524,288 credentials a window, about 17,000 a second)
//! before the share applies.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use hmac::{Hmac, Mac};
use lava_xdr::frame::{Frame, FrameHeader, HEADER_BYTES};
use sha2::Sha256;

use crate::key::{ClusterKey, KeyId};

type HmacSha256 = Hmac<Sha256>;

/// Size of a nonce, in bytes.
pub const NONCE_BYTES: usize = 16;
/// Size of the HMAC-SHA256 tag, in bytes.
pub const MAC_BYTES: usize = 32;
/// Bytes of the trailer before the MAC: key id, timestamp, nonce.
const TRAILER_FIELDS_BYTES: usize = 4 + 8 + NONCE_BYTES;
/// Size of the authentication trailer appended to every sealed message.
pub const TRAILER_BYTES: usize = TRAILER_FIELDS_BYTES + MAC_BYTES;
/// Default tolerance between the sender's and the receiver's clocks, either way.
pub const AUTH_WINDOW_MS_DEFAULT: u64 = 30_000;
/// Default replay cache bound: 1,048,576 pairs, about 40 MiB when full (memory follows the
/// authenticated messages received: an idle daemon's cache is empty). An entry lives until
/// its timestamp is `window_ms` old, so with the default window this admits about 35,000
/// messages a second, sustained, from senders whose clocks agree — above what one mbatchd
/// handles, so the cache never bounds a cluster's job rate (at 262,144 it did: about 8,700
/// frames or credentials a second, under the 10,000 jobs/s mbatchd aims at).
pub const REPLAY_ENTRIES_MAX_DEFAULT: usize = 1 << 20;
/// Default share of the credential cache one user may hold: a sixteenth of it, more than
/// sbatchd issues one user in a window (docs/operations.md, "Credentials per user").
pub const REPLAY_ENTRIES_PER_USER_MAX_DEFAULT: usize = REPLAY_ENTRIES_MAX_DEFAULT / 16;

/// What a MAC was made for; each has its own label so MACs never cross over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Domain {
    /// A frame: header ‖ payload.
    Frame,
    /// Caller-framed bytes ([`Authenticator::seal_bytes`]).
    Bytes,
    /// A user credential token.
    Credential,
}

impl Domain {
    fn label(self) -> &'static [u8] {
        match self {
            Domain::Frame => b"lava-net frame v1\0",
            Domain::Bytes => b"lava-net bytes v1\0",
            Domain::Credential => b"lava-net credential v1\0",
        }
    }
}

/// A 128-bit value, unique per sealed message: what the replay caches remember. It needs
/// to be unique, not secret (a MAC cannot be made without the key, whatever the nonce).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nonce(pub [u8; NONCE_BYTES]);

/// Where this process's nonces come from: a 64-bit prefix from the OS random source, drawn
/// once per process (again in a forked child: the pid tells), and a counter.
struct NonceSource {
    pid: u32,
    prefix: [u8; 8],
    next: u64,
}

static NONCE_SOURCE: std::sync::Mutex<Option<NonceSource>> = std::sync::Mutex::new(None);

impl Nonce {
    /// A nonce no other message sealed with the key has: this process's random prefix and
    /// its next count. Drawing all 128 bits from the OS for each frame was a system call per
    /// answer sent; two processes meet on a prefix once in 2^32 pairs, and even then only
    /// on the same count.
    pub fn fresh() -> Result<Nonce, getrandom::Error> {
        let pid = std::process::id();
        let mut source = NONCE_SOURCE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let source = match &mut *source {
            Some(source) if source.pid == pid => source,
            slot => {
                let mut prefix = [0u8; 8];
                getrandom::fill(&mut prefix)?;
                slot.insert(NonceSource { pid, prefix, next: 0 })
            }
        };
        let mut bytes = [0u8; NONCE_BYTES];
        bytes[..8].copy_from_slice(&source.prefix);
        bytes[8..].copy_from_slice(&source.next.to_be_bytes());
        source.next += 1;
        Ok(Nonce(bytes))
    }
}

impl fmt::Display for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

/// Milliseconds since the Unix epoch by the system clock (0 before the epoch).
pub fn system_now_ms() -> u64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

/// Why a sealed message was refused. Each variant is a reason to drop the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Too short to hold the trailer.
    #[error("malformed authentication trailer: {body_bytes} bytes, the trailer alone is {TRAILER_BYTES}")]
    Malformed {
        /// Bytes present.
        body_bytes: usize,
    },
    /// Sealed with a key this receiver does not hold.
    #[error(
        "sealed with key {key_id}, but this host accepts key {current}{}; is the cluster key file the same on every host?",
        .other.map(|id| format!(" and {id}")).unwrap_or_default()
    )]
    UnknownKey {
        /// Key id in the trailer.
        key_id: KeyId,
        /// This receiver's current key.
        current: KeyId,
        /// This receiver's other accepted key, if any.
        other: Option<KeyId>,
    },
    /// The MAC does not match: altered in transit, or forged.
    #[error("bad MAC under key {key_id}: the message was altered or forged")]
    BadMac {
        /// Key id in the trailer.
        key_id: KeyId,
    },
    /// Sealed too long ago (or before what the replay cache still remembers).
    #[error("stale: sealed at {timestamp_ms} ms, now is {now_ms} ms, window is {window_ms} ms")]
    Stale {
        /// Timestamp in the trailer.
        timestamp_ms: u64,
        /// Receiver's clock.
        now_ms: u64,
        /// Accepted clock difference.
        window_ms: u64,
    },
    /// Sealed in the future beyond the window: a sender's clock is far ahead.
    #[error("from the future: sealed at {timestamp_ms} ms, now is {now_ms} ms, window is {window_ms} ms")]
    Future {
        /// Timestamp in the trailer.
        timestamp_ms: u64,
        /// Receiver's clock.
        now_ms: u64,
        /// Accepted clock difference.
        window_ms: u64,
    },
    /// The same sealed message was accepted before.
    #[error("replay: the message sealed at {timestamp_ms} ms with nonce {nonce} was already accepted")]
    Replay {
        /// Timestamp in the trailer.
        timestamp_ms: u64,
        /// Nonce in the trailer.
        nonce: Nonce,
    },
    /// One user holds their whole share of the credential cache; refused (others go on).
    #[error(
        "user {uid}@{host} presented {entries_max} credentials within the window, the most one user may: refused"
    )]
    ReplayQuotaFull {
        /// The user's uid.
        uid: u32,
        /// The host that issued the credentials.
        host: String,
        /// The share.
        entries_max: usize,
    },
    /// The replay cache is full; refused rather than forgetting an entry.
    #[error("replay cache full ({entries_max} messages within the window): refused rather than forgotten")]
    ReplayCacheFull {
        /// Configured bound.
        entries_max: usize,
    },
    /// A payload so large that payload + trailer does not fit a frame's 32-bit length.
    #[error("payload of {payload_bytes} bytes is too large to seal into a frame")]
    PayloadTooLarge {
        /// Payload size.
        payload_bytes: usize,
    },
}

/// The keys an [`Authenticator`] holds: the current one, which seals, and optionally one
/// other that is also accepted when opening (the next key, then the previous one, during a
/// rotation).
pub struct KeyRing {
    current: KeyEntry,
    other: Option<KeyEntry>,
}

struct KeyEntry {
    id: KeyId,
    mac: HmacSha256,
}

impl KeyEntry {
    fn new(key: &ClusterKey) -> KeyEntry {
        let mac = HmacSha256::new_from_slice(key.secret()).expect("HMAC accepts keys of any length");
        KeyEntry { id: key.id(), mac }
    }
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing")
            .field("current", &self.current.id)
            .field("other", &self.other.as_ref().map(|entry| entry.id))
            .finish()
    }
}

impl KeyRing {
    /// A ring with one key, which seals and opens.
    pub fn new(current: &ClusterKey) -> KeyRing {
        KeyRing { current: KeyEntry::new(current), other: None }
    }

    /// Also accepts messages sealed with `other` (never seals with it).
    pub fn with_other(self, other: &ClusterKey) -> KeyRing {
        KeyRing { other: Some(KeyEntry::new(other)), ..self }
    }

    /// Id of the key that seals.
    pub fn current_id(&self) -> KeyId {
        self.current.id
    }

    fn find(&self, key_id: KeyId) -> Result<&KeyEntry, AuthError> {
        std::iter::once(&self.current).chain(&self.other).find(|entry| entry.id == key_id).ok_or(
            AuthError::UnknownKey {
                key_id,
                current: self.current.id,
                other: self.other.as_ref().map(|entry| entry.id),
            },
        )
    }
}

/// Window and bound of an [`Authenticator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    /// Largest accepted difference between the sealing and the opening clock, either way.
    pub window_ms: u64,
    /// Most (timestamp, nonce) pairs remembered in each cache (daemons', users');
    /// beyond it, messages are refused.
    pub replay_entries_max: usize,
    /// Most credential pairs one user may hold in the users' cache.
    pub replay_entries_per_user_max: usize,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            window_ms: AUTH_WINDOW_MS_DEFAULT,
            replay_entries_max: REPLAY_ENTRIES_MAX_DEFAULT,
            replay_entries_per_user_max: REPLAY_ENTRIES_PER_USER_MAX_DEFAULT,
        }
    }
}

/// Seals and opens messages with the cluster key; see the module doc for the rules.
/// Share one per daemon (in an `Arc`) so its replay cache covers every connection.
#[derive(Debug)]
pub struct Authenticator {
    keys: KeyRing,
    config: AuthConfig,
    /// Daemons' frames and sealed bytes.
    replay: Mutex<ReplayCache>,
    /// Users' credentials, with a share per user.
    replay_users: Mutex<ReplayCache>,
    /// The daemon this one is, for credentials (none: it takes no credentials).
    audience: Option<crate::credential::Audience>,
}

/// Who presented a credential: uid at the issuing host.
type User = (u32, String);

#[derive(Debug, Default)]
struct ReplayCache {
    /// Accepted pairs, and the user each credential pair counts against.
    seen: BTreeMap<(u64, Nonce), Option<User>>,
    /// Pairs held per user.
    per_user: HashMap<User, usize>,
    /// Timestamps below this were expired and can no longer be checked for replay.
    forgotten_below_ms: u64,
}

/// The trailer's fields, parsed.
struct Trailer {
    key_id: KeyId,
    timestamp_ms: u64,
    nonce: Nonce,
}

impl Trailer {
    fn write_fields(&self) -> [u8; TRAILER_FIELDS_BYTES] {
        let mut fields = [0u8; TRAILER_FIELDS_BYTES];
        let mut dst = &mut fields[..];
        dst.put_u32(self.key_id.0);
        dst.put_u64(self.timestamp_ms);
        dst.put_slice(&self.nonce.0);
        fields
    }

    fn parse_fields(fields: &[u8; TRAILER_FIELDS_BYTES]) -> Trailer {
        let (key_id, rest) = fields.split_at(4);
        let (timestamp, nonce) = rest.split_at(8);
        Trailer {
            key_id: KeyId(u32::from_be_bytes(key_id.try_into().expect("4 bytes"))),
            timestamp_ms: u64::from_be_bytes(timestamp.try_into().expect("8 bytes")),
            nonce: Nonce(nonce.try_into().expect("16 bytes")),
        }
    }
}

impl Authenticator {
    /// An authenticator with an empty replay cache.
    pub fn new(keys: KeyRing, config: AuthConfig) -> Authenticator {
        Authenticator {
            keys,
            config,
            replay: Mutex::new(ReplayCache::default()),
            replay_users: Mutex::new(ReplayCache::default()),
            audience: None,
        }
    }

    /// This authenticator takes credentials made for `audience` (and no other).
    pub fn with_audience(mut self, audience: crate::credential::Audience) -> Authenticator {
        self.audience = Some(audience);
        self
    }

    /// The audience of the credentials it takes, if any.
    pub fn audience(&self) -> Option<&crate::credential::Audience> {
        self.audience.as_ref()
    }

    /// The window and bound in force.
    pub fn config(&self) -> AuthConfig {
        self.config
    }

    /// Pairs currently held by the replay caches (daemons' and users').
    pub fn replay_entries(&self) -> usize {
        let daemons = self.replay.lock().unwrap_or_else(PoisonError::into_inner).seen.len();
        daemons + self.replay_users.lock().unwrap_or_else(PoisonError::into_inner).seen.len()
    }

    /// Returns the body to send after `header`: `payload` followed by the trailer. The MAC
    /// covers the header with `length` = payload + trailer, which is what `encode_frame` writes.
    pub fn seal(
        &self,
        header: FrameHeader,
        payload: &[u8],
        now_ms: u64,
        nonce: Nonce,
    ) -> Result<Bytes, AuthError> {
        let length = payload
            .len()
            .checked_add(TRAILER_BYTES)
            .and_then(|length| u32::try_from(length).ok())
            .ok_or(AuthError::PayloadTooLarge { payload_bytes: payload.len() })?;
        let header_bytes = header_bytes(FrameHeader { length, ..header });
        let trailer = self.seal_parts(Domain::Frame, &[&header_bytes, payload], now_ms, nonce);
        let mut body = BytesMut::with_capacity(payload.len() + TRAILER_BYTES);
        body.put_slice(payload);
        body.put_slice(&trailer);
        Ok(body.freeze())
    }

    /// Checks a received frame and returns its payload (the body without the trailer).
    pub fn open(&self, frame: &Frame, now_ms: u64) -> Result<Bytes, AuthError> {
        let payload_bytes = payload_bytes(frame.body.len())?;
        let (payload, trailer) = frame.body.split_at(payload_bytes);
        let header_bytes = header_bytes(frame.header);
        self.open_parts(Domain::Frame, &[&header_bytes, payload], trailer, now_ms)?;
        Ok(frame.body.slice(..payload_bytes))
    }

    /// Returns the trailer to append to `data`, for transports with their own framing.
    pub fn seal_bytes(&self, data: &[u8], now_ms: u64, nonce: Nonce) -> [u8; TRAILER_BYTES] {
        self.seal_parts(Domain::Bytes, &[data], now_ms, nonce)
    }

    /// Checks `data ‖ trailer` as made with [`Authenticator::seal_bytes`]; returns `data`.
    pub fn open_bytes<'a>(&self, sealed: &'a [u8], now_ms: u64) -> Result<&'a [u8], AuthError> {
        self.open_in(Domain::Bytes, sealed, now_ms).map(|(data, _)| data)
    }

    /// [`Authenticator::open_bytes`] in another domain; also returns the trailer's
    /// timestamp and nonce.
    pub(crate) fn open_in<'a>(
        &self,
        domain: Domain,
        sealed: &'a [u8],
        now_ms: u64,
    ) -> Result<(&'a [u8], (u64, Nonce)), AuthError> {
        let (data, trailer) = sealed.split_at(payload_bytes(sealed.len())?);
        let trailer = self.open_parts(domain, &[data], trailer, now_ms)?;
        Ok((data, (trailer.timestamp_ms, trailer.nonce)))
    }

    /// Steps 1 to 4 of a credential token (MAC and window), without step 5: the caller reads
    /// the now authenticated claims and calls [`Authenticator::remember_credential`].
    pub(crate) fn open_credential<'a>(
        &self,
        sealed: &'a [u8],
        now_ms: u64,
    ) -> Result<(&'a [u8], (u64, Nonce)), AuthError> {
        let (data, trailer) = sealed.split_at(payload_bytes(sealed.len())?);
        let trailer = self.check_trailer(Domain::Credential, &[data], trailer, now_ms)?;
        Ok((data, (trailer.timestamp_ms, trailer.nonce)))
    }

    /// Step 5 of a credential token, in the users' cache: refuses a replay, and a user who
    /// already holds their share of it ([`AuthError::ReplayQuotaFull`]).
    pub(crate) fn remember_credential(
        &self,
        uid: u32,
        host: &str,
        (timestamp_ms, nonce): (u64, Nonce),
        now_ms: u64,
    ) -> Result<(), AuthError> {
        let mut cache = self.replay_users.lock().unwrap_or_else(PoisonError::into_inner);
        let user = (uid, host.to_owned());
        cache.remember(&self.config, timestamp_ms, nonce, Some(user), now_ms)
    }

    pub(crate) fn seal_parts(
        &self,
        domain: Domain,
        parts: &[&[u8]],
        now_ms: u64,
        nonce: Nonce,
    ) -> [u8; TRAILER_BYTES] {
        let fields = Trailer { key_id: self.keys.current.id, timestamp_ms: now_ms, nonce }.write_fields();
        let tag = mac(&self.keys.current, domain, parts, &fields).finalize().into_bytes();
        let mut trailer = [0u8; TRAILER_BYTES];
        trailer[..TRAILER_FIELDS_BYTES].copy_from_slice(&fields);
        trailer[TRAILER_FIELDS_BYTES..].copy_from_slice(&tag);
        trailer
    }

    /// Runs the checks of the module doc on `parts ‖ trailer` (a daemon's message: the
    /// daemons' cache); `trailer` is exactly [`TRAILER_BYTES`] long.
    fn open_parts(
        &self,
        domain: Domain,
        parts: &[&[u8]],
        trailer: &[u8],
        now_ms: u64,
    ) -> Result<Trailer, AuthError> {
        let parsed = self.check_trailer(domain, parts, trailer, now_ms)?;
        let mut cache = self.replay.lock().unwrap_or_else(PoisonError::into_inner);
        cache.remember(&self.config, parsed.timestamp_ms, parsed.nonce, None, now_ms)?;
        Ok(parsed)
    }

    /// Steps 1 to 4 of the module doc.
    fn check_trailer(
        &self,
        domain: Domain,
        parts: &[&[u8]],
        trailer: &[u8],
        now_ms: u64,
    ) -> Result<Trailer, AuthError> {
        let (fields, tag) = trailer.split_at(TRAILER_FIELDS_BYTES);
        let fields: &[u8; TRAILER_FIELDS_BYTES] = fields.try_into().expect("caller split a whole trailer");
        let parsed = Trailer::parse_fields(fields);
        let entry = self.keys.find(parsed.key_id)?;
        mac(entry, domain, parts, fields)
            .verify_slice(tag)
            .map_err(|_| AuthError::BadMac { key_id: parsed.key_id })?;
        let window_ms = self.config.window_ms;
        let timestamp_ms = parsed.timestamp_ms;
        if timestamp_ms > now_ms.saturating_add(window_ms) {
            return Err(AuthError::Future { timestamp_ms, now_ms, window_ms });
        }
        if timestamp_ms.saturating_add(window_ms) < now_ms {
            return Err(AuthError::Stale { timestamp_ms, now_ms, window_ms });
        }
        Ok(parsed)
    }
}

impl ReplayCache {
    /// Step 5: refuses a pair seen before, one older than what the cache can vouch for, a
    /// user at their share and a full cache; else remembers the pair.
    fn remember(
        &mut self,
        config: &AuthConfig,
        timestamp_ms: u64,
        nonce: Nonce,
        user: Option<User>,
        now_ms: u64,
    ) -> Result<(), AuthError> {
        let window_ms = config.window_ms;
        self.expire(now_ms.saturating_sub(window_ms));
        if timestamp_ms < self.forgotten_below_ms {
            return Err(AuthError::Stale { timestamp_ms, now_ms, window_ms });
        }
        if self.seen.contains_key(&(timestamp_ms, nonce)) {
            return Err(AuthError::Replay { timestamp_ms, nonce });
        }
        // A user beyond their share is refused only while the cache is at least half full:
        // alone, a user may fill half the cache before it applies; under a flood, the flooder is
        // held to their share and the other half stays free for everyone else.
        if let Some(user) = &user
            && self.per_user.get(user).copied().unwrap_or(0) >= config.replay_entries_per_user_max
            && self.seen.len() >= config.replay_entries_max / 2
        {
            let (uid, host) = user.clone();
            return Err(AuthError::ReplayQuotaFull {
                uid,
                host,
                entries_max: config.replay_entries_per_user_max,
            });
        }
        if self.seen.len() >= config.replay_entries_max {
            return Err(AuthError::ReplayCacheFull { entries_max: config.replay_entries_max });
        }
        if let Some(user) = &user {
            *self.per_user.entry(user.clone()).or_default() += 1;
        }
        self.seen.insert((timestamp_ms, nonce), user);
        Ok(())
    }

    /// Forgets pairs older than `horizon_ms`: the window check refuses them from now on.
    fn expire(&mut self, horizon_ms: u64) {
        self.forgotten_below_ms = self.forgotten_below_ms.max(horizon_ms);
        while let Some(entry) = self.seen.first_entry() {
            if entry.key().0 >= self.forgotten_below_ms {
                break;
            }
            if let Some(user) = entry.remove()
                && let Some(count) = self.per_user.get_mut(&user)
            {
                *count -= 1;
                if *count == 0 {
                    self.per_user.remove(&user);
                }
            }
        }
    }
}

fn header_bytes(header: FrameHeader) -> [u8; HEADER_BYTES] {
    let mut bytes = [0u8; HEADER_BYTES];
    header.write(&mut &mut bytes[..]);
    bytes
}

fn payload_bytes(sealed_bytes: usize) -> Result<usize, AuthError> {
    sealed_bytes.checked_sub(TRAILER_BYTES).ok_or(AuthError::Malformed { body_bytes: sealed_bytes })
}

fn mac(entry: &KeyEntry, domain: Domain, parts: &[&[u8]], fields: &[u8]) -> HmacSha256 {
    let mut mac = entry.mac.clone();
    mac.update(domain.label());
    parts.iter().for_each(|part| mac.update(part));
    mac.update(fields);
    mac
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW_MS: u64 = 1_700_000_000_000;

    fn key(byte: u8) -> ClusterKey {
        ClusterKey::from_bytes(&[byte; 32]).expect("32-byte key")
    }

    fn authenticator(ring: KeyRing) -> Authenticator {
        Authenticator::new(
            ring,
            AuthConfig { window_ms: 30_000, replay_entries_max: 4, replay_entries_per_user_max: 4 },
        )
    }

    fn header() -> FrameHeader {
        FrameHeader { sequence: 9, operation: 30, version: 1, length: 0, status: 0 }
    }

    fn nonce(byte: u8) -> Nonce {
        Nonce([byte; NONCE_BYTES])
    }

    /// Seals `payload` as a frame the receiver would decode.
    fn sealed_frame(auth: &Authenticator, payload: &[u8], at_ms: u64, nonce: Nonce) -> Frame {
        let body = auth.seal(header(), payload, at_ms, nonce).expect("seal");
        let length = body.len() as u32;
        Frame { header: FrameHeader { length, ..header() }, body }
    }

    fn flip(bytes: &Bytes, bit_idx: usize) -> Bytes {
        let mut copy = bytes.to_vec();
        copy[bit_idx / 8] ^= 1 << (bit_idx % 8);
        Bytes::from(copy)
    }

    // Goal: a process's nonces never repeat, from any thread, and a forked child does not
    // continue its parent's sequence. Method: 40,000 nonces from four threads are all
    // distinct and share the process's prefix; then the source is made to look as if it
    // were a parent's (another pid): the next nonce has a new prefix and starts counting
    // again.
    #[test]
    fn fresh_nonces_are_unique_and_a_child_draws_its_own_prefix() {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| (0..10_000).map(|_| Nonce::fresh().expect("nonce")).collect::<Vec<_>>())
            })
            .collect();
        let nonces: Vec<Nonce> = threads.into_iter().flat_map(|t| t.join().expect("thread")).collect();
        let distinct: std::collections::BTreeSet<Nonce> = nonces.iter().copied().collect();
        assert_eq!(distinct.len(), nonces.len());
        let prefix = nonces[0].0[..8].to_vec();
        assert!(nonces.iter().all(|n| n.0[..8] == prefix[..]));
        {
            let mut source = NONCE_SOURCE.lock().expect("lock");
            let source = source.as_mut().expect("drawn");
            source.pid = source.pid.wrapping_add(1);
        }
        let child = Nonce::fresh().expect("nonce");
        assert_ne!(child.0[..8], prefix[..]);
        assert_eq!(child.0[8..], 0u64.to_be_bytes());
    }

    // Goal: a sealed frame opens to its payload once, and the trailer is where the layout
    // says. Method: seal, check the trailer's fields, open.
    #[test]
    fn sealed_frame_opens_once() {
        let sender = authenticator(KeyRing::new(&key(1)));
        let receiver = authenticator(KeyRing::new(&key(1)));
        let frame = sealed_frame(&sender, b"payload", NOW_MS, nonce(5));
        assert_eq!(frame.body.len(), 7 + TRAILER_BYTES);
        let trailer = &frame.body[7..];
        assert_eq!(trailer[0..4], key(1).id().0.to_be_bytes());
        assert_eq!(trailer[4..12], NOW_MS.to_be_bytes());
        assert_eq!(trailer[12..28], [5; NONCE_BYTES]);
        assert_eq!(receiver.open(&frame, NOW_MS + 10).expect("open"), Bytes::from_static(b"payload"));
        assert_eq!(
            receiver.open(&frame, NOW_MS + 20),
            Err(AuthError::Replay { timestamp_ms: NOW_MS, nonce: nonce(5) })
        );
    }

    // Goal: any single flipped bit anywhere in header, payload or trailer is refused.
    // Method: flip every bit of a small frame in turn; none may open.
    #[test]
    fn every_flipped_bit_is_refused() {
        let auth = authenticator(KeyRing::new(&key(1)));
        let frame = sealed_frame(&auth, b"abc", NOW_MS, nonce(1));
        for bit_idx in 0..frame.body.len() * 8 {
            let tampered = Frame { header: frame.header, body: flip(&frame.body, bit_idx) };
            let err = auth.open(&tampered, NOW_MS).expect_err("tampered body");
            assert!(matches!(err, AuthError::BadMac { .. } | AuthError::UnknownKey { .. }), "bit {bit_idx}");
        }
        for bit_idx in 0..HEADER_BYTES * 8 {
            let bytes = flip(&Bytes::copy_from_slice(&header_bytes(frame.header)), bit_idx);
            let tampered =
                Frame { header: FrameHeader::parse(&bytes).expect("20 bytes"), body: frame.body.clone() };
            assert!(matches!(auth.open(&tampered, NOW_MS), Err(AuthError::BadMac { .. })), "bit {bit_idx}");
        }
        assert_eq!(auth.replay_entries(), 0, "nothing unauthenticated entered the cache");
        assert!(auth.open(&frame, NOW_MS).is_ok());
    }

    // Goal: the other key of a ring is accepted for opening but never used for sealing;
    // a key outside the ring is named. Method: a rotation in its three phases.
    #[test]
    fn rotation_accepts_the_other_key() {
        let (old, new) = (key(1), key(2));
        let phase_one = authenticator(KeyRing::new(&old).with_other(&new));
        let phase_two = authenticator(KeyRing::new(&new).with_other(&old));
        let done = authenticator(KeyRing::new(&new));
        let from_two = sealed_frame(&phase_two, b"x", NOW_MS, nonce(1));
        assert!(phase_one.open(&from_two, NOW_MS).is_ok());
        assert!(phase_two.open(&sealed_frame(&phase_one, b"x", NOW_MS, nonce(2)), NOW_MS).is_ok());
        assert_eq!(
            done.open(&sealed_frame(&phase_one, b"x", NOW_MS, nonce(3)), NOW_MS),
            Err(AuthError::UnknownKey { key_id: old.id(), current: new.id(), other: None })
        );
    }

    // Goal: the window is inclusive at ±window_ms and refuses one ms beyond either side.
    // Method: seal at the four edges, open at a fixed now.
    #[test]
    fn timestamp_window_is_enforced() {
        let auth = authenticator(KeyRing::new(&key(1)));
        let window_ms = 30_000;
        let at = |at_ms, byte| auth.open(&sealed_frame(&auth, b"", at_ms, nonce(byte)), NOW_MS);
        assert!(at(NOW_MS - window_ms, 1).is_ok());
        assert!(at(NOW_MS + window_ms, 2).is_ok());
        assert_eq!(
            at(NOW_MS - window_ms - 1, 3),
            Err(AuthError::Stale { timestamp_ms: NOW_MS - window_ms - 1, now_ms: NOW_MS, window_ms })
        );
        assert_eq!(
            at(NOW_MS + window_ms + 1, 4),
            Err(AuthError::Future { timestamp_ms: NOW_MS + window_ms + 1, now_ms: NOW_MS, window_ms })
        );
    }

    // Goal: a full replay cache refuses rather than forgets, drains by expiry, and a clock
    // stepping back cannot reopen what was forgotten. Method: replay_entries_max = 4.
    #[test]
    fn replay_cache_is_bounded_and_refuses_when_full() {
        let sender = authenticator(KeyRing::new(&key(1)));
        let receiver = authenticator(KeyRing::new(&key(1)));
        let frames: Vec<Frame> = (0..5).map(|byte| sealed_frame(&sender, b"", NOW_MS, nonce(byte))).collect();
        for frame in &frames[..4] {
            receiver.open(frame, NOW_MS).expect("room in the cache");
        }
        assert_eq!(receiver.open(&frames[4], NOW_MS), Err(AuthError::ReplayCacheFull { entries_max: 4 }));
        let later_ms = NOW_MS + 30_001;
        let fresh = sealed_frame(&sender, b"", later_ms, nonce(9));
        assert!(receiver.open(&fresh, later_ms).is_ok(), "expired entries make room");
        assert_eq!(receiver.replay_entries(), 1);
        let err = receiver
            .open(&frames[0], NOW_MS)
            .expect_err("forgotten, so refused even if the clock steps back");
        assert!(matches!(err, AuthError::Stale { .. }));
    }

    // Goal: raw-byte sealing round-trips and is separated from frames and credentials.
    // Method: seal a datagram, open it as bytes, as a credential, and truncated.
    #[test]
    fn bytes_are_sealed_in_their_own_domain() {
        let auth = authenticator(KeyRing::new(&key(1)));
        let mut datagram = b"lim load report".to_vec();
        datagram.extend_from_slice(&auth.seal_bytes(b"lim load report", NOW_MS, nonce(1)));
        assert_eq!(auth.open_bytes(&datagram, NOW_MS).expect("open"), b"lim load report");
        assert!(matches!(auth.open_in(Domain::Credential, &datagram, NOW_MS), Err(AuthError::BadMac { .. })));
        assert_eq!(auth.open_bytes(&datagram[..59], NOW_MS), Err(AuthError::Malformed { body_bytes: 59 }));
    }

    proptest! {
        // Goal: opening arbitrary bytes never panics and never succeeds.
        // Method: proptest bytes, opened both raw and as a frame body.
        #[test]
        fn arbitrary_bytes_never_open(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let auth = authenticator(KeyRing::new(&key(1)));
            prop_assert!(auth.open_bytes(&bytes, NOW_MS).is_err());
            let frame = Frame { header: header(), body: Bytes::from(bytes) };
            prop_assert!(auth.open(&frame, NOW_MS).is_err());
        }
    }
}
