//! User credentials: a token in which a local daemon vouches, with the cluster key, for the
//! uid it learned from the kernel (SO_PEERCRED), so that mbatchd never trusts a uid a client
//! merely states. The MUNGE idea, for our cluster key.
//!
//! Token layout (big-endian), followed by the 60-byte trailer of [`crate::auth`] sealed in
//! its own "credential" domain, whose timestamp is the issue time and whose nonce is the
//! token's:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `LVC1` |
//! | 4 | uid |
//! | 4 | gid |
//! | 2 + n | username length, then its UTF-8 bytes (n ≤ [`USERNAME_BYTES_MAX`]) |
//! | 2 + n | hostname length, then its UTF-8 bytes (n ≤ [`HOSTNAME_BYTES_MAX`]) |
//! | 4 | audience: the kind of daemon it is for ([`Audience::kind`]) |
//! | 2 + n | audience: the cluster of that daemon (n ≤ [`HOSTNAME_BYTES_MAX`]) |
//!
//! A token is for one audience, the kind of daemon and the cluster the client named when it
//! asked for it: [`Credential::verify`] refuses it anywhere else, so a token seen on its way
//! to mbatchd cannot be spent at the coordinator, or at another cluster's daemons.
//!
//! Verification authenticates the whole token before parsing any of it, then applies the
//! same window and replay rules as frames: a token is good once, within the window.
//! This module issues and checks tokens; it never decides who may do what.

use bytes::{Buf, BufMut};

use crate::auth::{AuthError, Authenticator, Domain, Nonce, TRAILER_BYTES};

/// Longest username in a credential, in bytes.
pub const USERNAME_BYTES_MAX: usize = 256;
/// Longest hostname in a credential, in bytes (the DNS limit).
pub const HOSTNAME_BYTES_MAX: usize = 255;
/// Longest token, trailer included.
pub const CREDENTIAL_BYTES_MAX: usize =
    4 + 4 + 4 + 2 + USERNAME_BYTES_MAX + 2 + HOSTNAME_BYTES_MAX + 4 + 2 + HOSTNAME_BYTES_MAX + TRAILER_BYTES;
const CREDENTIAL_MAGIC: &[u8; 4] = b"LVC2";

/// The daemon a credential is for: its kind and its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audience {
    /// [`Audience::MBATCHD`] or [`Audience::COORDINATOR`].
    pub kind: u32,
    /// The cluster's name (lsf.cluster's `NAME`).
    pub cluster: String,
}

impl Audience {
    /// mbatchd: the batch commands.
    pub const MBATCHD: u32 = 1;
    /// The coordinator: workers and `coordctl`.
    pub const COORDINATOR: u32 = 2;
    /// An sbatchd: `bsub -I`'s attach to the execution host.
    pub const SBATCHD: u32 = 3;

    /// The audience of kind `kind` in `cluster`.
    pub fn new(kind: u32, cluster: &str) -> Audience {
        Audience { kind, cluster: cluster.to_owned() }
    }

    /// The kind's name, for messages.
    pub fn kind_name(kind: u32) -> &'static str {
        match kind {
            Audience::MBATCHD => "mbatchd",
            Audience::COORDINATOR => "the coordinator",
            Audience::SBATCHD => "sbatchd",
            _ => "an unknown daemon",
        }
    }
}

impl std::fmt::Display for Audience {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of cluster {}", Audience::kind_name(self.kind), self.cluster)
    }
}

/// Who a local daemon vouches for, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    /// The user's uid, as the kernel reported it.
    pub uid: u32,
    /// The user's primary gid, as the kernel reported it.
    pub gid: u32,
    /// The user's login name on the issuing host.
    pub username: String,
    /// The issuing host.
    pub hostname: String,
    /// Issue time, ms since the Unix epoch.
    pub issued_at_ms: u64,
    /// The token's random nonce.
    pub nonce: Nonce,
    /// The daemon it is for.
    pub audience: Audience,
}

/// Why a credential could not be issued or was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The token failed authentication (forged, altered, expired, replayed...).
    #[error("credential refused: {0}")]
    Auth(#[from] AuthError),
    /// A name is longer than its limit.
    #[error("credential {field} of {bytes} bytes exceeds the limit of {max} bytes")]
    NameTooLong {
        /// `username` or `hostname`.
        field: &'static str,
        /// Its length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The token is larger than any valid one.
    #[error("credential of {bytes} bytes exceeds the limit of {CREDENTIAL_BYTES_MAX} bytes")]
    TooLarge {
        /// Its length.
        bytes: usize,
    },
    /// A genuine token for another daemon.
    #[error("the credential is for {got}, not for {want}")]
    WrongAudience {
        /// The audience the token names.
        got: Audience,
        /// The verifier's.
        want: Audience,
    },
    /// A token presented to a daemon that takes no credentials.
    #[error("the credential is for {got}; this daemon takes no credentials")]
    NoAudience {
        /// The audience the token names.
        got: Audience,
    },
    /// An authenticated token that does not parse: a different token version.
    #[error("malformed credential: {what}")]
    Malformed {
        /// What was wrong.
        what: &'static str,
    },
}

impl Credential {
    /// Serializes and seals the credential with the current cluster key.
    pub fn seal(&self, auth: &Authenticator) -> Result<Vec<u8>, CredentialError> {
        let username = checked_name("username", &self.username, USERNAME_BYTES_MAX)?;
        let hostname = checked_name("hostname", &self.hostname, HOSTNAME_BYTES_MAX)?;
        let cluster = checked_name("audience cluster", &self.audience.cluster, HOSTNAME_BYTES_MAX)?;
        let mut token = Vec::with_capacity(CREDENTIAL_BYTES_MAX);
        token.put_slice(CREDENTIAL_MAGIC);
        token.put_u32(self.uid);
        token.put_u32(self.gid);
        for name in [username, hostname] {
            token.put_u16(name.len() as u16);
            token.put_slice(name);
        }
        token.put_u32(self.audience.kind);
        token.put_u16(cluster.len() as u16);
        token.put_slice(cluster);
        let trailer = auth.seal_parts(Domain::Credential, &[&token], self.issued_at_ms, self.nonce);
        token.extend_from_slice(&trailer);
        Ok(token)
    }

    /// Authenticates a token (MAC, window, audience, replay) and returns the credential it
    /// carries; a token for another audience than `auth`'s
    /// ([`Authenticator::with_audience`]) is refused, and an authenticator without one
    /// takes no credential at all.
    pub fn verify(auth: &Authenticator, token: &[u8], now_ms: u64) -> Result<Credential, CredentialError> {
        if token.len() > CREDENTIAL_BYTES_MAX {
            return Err(CredentialError::TooLarge { bytes: token.len() });
        }
        let (mut claims, (issued_at_ms, nonce)) = auth.open_credential(token, now_ms)?;
        let malformed = |what| CredentialError::Malformed { what };
        if claims.len() < 12 || &claims[..4] != CREDENTIAL_MAGIC {
            return Err(malformed("bad magic"));
        }
        claims.advance(4);
        let uid = claims.get_u32();
        let gid = claims.get_u32();
        let username = take_name(&mut claims).ok_or(malformed("bad username"))?;
        let hostname = take_name(&mut claims).ok_or(malformed("bad hostname"))?;
        let kind = claims.try_get_u32().map_err(|_| malformed("no audience"))?;
        let cluster = take_name(&mut claims).ok_or(malformed("bad audience"))?;
        if !claims.is_empty() {
            return Err(malformed("trailing bytes"));
        }
        let got = Audience { kind, cluster };
        match auth.audience() {
            Some(want) if *want == got => {}
            Some(want) => return Err(CredentialError::WrongAudience { got, want: want.clone() }),
            None => return Err(CredentialError::NoAudience { got }),
        }
        // Remembered against its user's share only now that the claims are read.
        auth.remember_credential(uid, &hostname, (issued_at_ms, nonce), now_ms)?;
        Ok(Credential { uid, gid, username, hostname, issued_at_ms, nonce, audience: got })
    }
}

fn checked_name<'a>(field: &'static str, name: &'a str, max: usize) -> Result<&'a [u8], CredentialError> {
    if name.len() > max {
        return Err(CredentialError::NameTooLong { field, bytes: name.len(), max });
    }
    Ok(name.as_bytes())
}

fn take_name(src: &mut &[u8]) -> Option<String> {
    let length = usize::from(src.try_get_u16().ok()?);
    let bytes = src.get(..length)?;
    let name = std::str::from_utf8(bytes).ok()?.to_owned();
    src.advance(length);
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{AuthConfig, KeyRing};
    use crate::key::ClusterKey;

    const NOW_MS: u64 = 1_700_000_000_000;

    fn authenticator(byte: u8) -> Authenticator {
        let key = ClusterKey::from_bytes(&[byte; 32]).expect("key");
        Authenticator::new(KeyRing::new(&key), AuthConfig::default()).with_audience(for_mbatchd())
    }

    fn alice() -> Credential {
        Credential {
            uid: 1000,
            gid: 100,
            username: "alice".to_owned(),
            hostname: "node01".to_owned(),
            issued_at_ms: NOW_MS,
            nonce: Nonce([3; 16]),
            audience: for_mbatchd(),
        }
    }

    fn for_mbatchd() -> Audience {
        Audience::new(Audience::MBATCHD, "lava")
    }

    // Goal: a token verifies to the same credential, exactly once.
    // Method: issue with one authenticator (sbatchd), verify with another (mbatchd).
    #[test]
    fn credential_round_trips_once() {
        let token = alice().seal(&authenticator(1)).expect("seal");
        let mbatchd = authenticator(1);
        assert_eq!(Credential::verify(&mbatchd, &token, NOW_MS + 1000), Ok(alice()));
        assert!(matches!(
            Credential::verify(&mbatchd, &token, NOW_MS + 2000),
            Err(CredentialError::Auth(AuthError::Replay { .. }))
        ));
    }

    // Goal (issue 18, item 1): one user flooding credentials fills only their own share of
    // the replay cache: they are refused, another user and a daemon's frames are not, and
    // the share frees as their credentials leave the window.
    #[test]
    fn one_users_flood_refuses_only_that_user() {
        let key = ClusterKey::from_bytes(&[1; 32]).expect("key");
        let config =
            AuthConfig { replay_entries_max: 8, replay_entries_per_user_max: 2, ..AuthConfig::default() };
        let mbatchd = Authenticator::new(KeyRing::new(&key), config).with_audience(for_mbatchd());
        let issuer = authenticator(1);
        let token =
            |who: &Credential, n: u8| Credential { nonce: Nonce([n; 16]), ..who.clone() }.seal(&issuer);
        // Alone, alice may go beyond her share while the cache is less than half full.
        for n in 0..4 {
            let token = token(&alice(), n).expect("seal");
            assert!(Credential::verify(&mbatchd, &token, NOW_MS).is_ok(), "alice alone, credential {n}");
        }
        let flood = token(&alice(), 4).expect("seal");
        assert!(matches!(
            Credential::verify(&mbatchd, &flood, NOW_MS),
            Err(CredentialError::Auth(AuthError::ReplayQuotaFull { uid: 1000, entries_max: 2, .. }))
        ));
        let bob = Credential { uid: 1001, username: "bob".to_owned(), ..alice() };
        assert!(Credential::verify(&mbatchd, &token(&bob, 9).expect("seal"), NOW_MS).is_ok(), "bob goes on");
        let other_host = Credential { hostname: "node02".to_owned(), ..alice() };
        assert!(
            Credential::verify(&mbatchd, &token(&other_host, 10).expect("seal"), NOW_MS).is_ok(),
            "the same uid issued by another host is another user"
        );
        let sealed = issuer.seal_bytes(b"a daemon's message", NOW_MS, Nonce([11; 16]));
        let mut message = b"a daemon's message".to_vec();
        message.extend_from_slice(&sealed);
        assert!(mbatchd.open_bytes(&message, NOW_MS).is_ok(), "daemons' frames have a cache of their own");
        let later = NOW_MS + config.window_ms + 1;
        let fresh = Credential { issued_at_ms: later, ..alice() };
        assert!(
            Credential::verify(&mbatchd, &token(&fresh, 12).expect("seal"), later).is_ok(),
            "the share frees"
        );
    }

    // Goal: a token whose uid was changed to root, one sealed with another key, and one
    // presented after the window are all refused. Method: one forged token each.
    #[test]
    fn forged_and_expired_credentials_are_refused() {
        let mbatchd = authenticator(1);
        let mut forged = alice().seal(&authenticator(1)).expect("seal");
        forged[4..8].copy_from_slice(&0u32.to_be_bytes());
        assert!(matches!(
            Credential::verify(&mbatchd, &forged, NOW_MS),
            Err(CredentialError::Auth(AuthError::BadMac { .. }))
        ));
        let other_key = alice().seal(&authenticator(2)).expect("seal");
        assert!(matches!(
            Credential::verify(&mbatchd, &other_key, NOW_MS),
            Err(CredentialError::Auth(AuthError::UnknownKey { .. }))
        ));
        let token = alice().seal(&authenticator(1)).expect("seal");
        assert!(matches!(
            Credential::verify(&mbatchd, &token, NOW_MS + 30_001),
            Err(CredentialError::Auth(AuthError::Stale { .. }))
        ));
        let mut datagram = b"x".to_vec();
        datagram.extend_from_slice(&mbatchd.seal_bytes(b"x", NOW_MS, Nonce([4; 16])));
        assert!(matches!(
            Credential::verify(&mbatchd, &datagram, NOW_MS),
            Err(CredentialError::Auth(AuthError::BadMac { .. }))
        ));
    }

    // Goal: names beyond their limits are refused when issuing, and names at their limits
    // make the largest token. Method: one name a byte too long, then both at the limit.
    #[test]
    fn overlong_names_are_refused() {
        let credential = Credential { username: "u".repeat(USERNAME_BYTES_MAX + 1), ..alice() };
        assert_eq!(
            credential.seal(&authenticator(1)),
            Err(CredentialError::NameTooLong { field: "username", bytes: 257, max: USERNAME_BYTES_MAX })
        );
        let audience = Audience::new(Audience::MBATCHD, &"c".repeat(HOSTNAME_BYTES_MAX));
        let longest = Credential {
            username: "u".repeat(USERNAME_BYTES_MAX),
            hostname: "h".repeat(HOSTNAME_BYTES_MAX),
            audience: audience.clone(),
            ..alice()
        };
        let token = longest.seal(&authenticator(1)).expect("seal");
        assert_eq!(token.len(), CREDENTIAL_BYTES_MAX);
        let verifier = authenticator(1).with_audience(audience);
        assert_eq!(Credential::verify(&verifier, &token, NOW_MS), Ok(longest));
    }

    // Goal (issue 18, item 10): a genuine token for mbatchd is refused by the coordinator
    // and by another cluster's mbatchd, and still accepted by its own.
    #[test]
    fn a_credential_is_good_only_for_its_audience() {
        let token = alice().seal(&authenticator(1)).expect("seal");
        let coordinator = Audience::new(Audience::COORDINATOR, "lava");
        assert_eq!(
            Credential::verify(&authenticator(1).with_audience(coordinator.clone()), &token, NOW_MS),
            Err(CredentialError::WrongAudience { got: for_mbatchd(), want: coordinator })
        );
        let elsewhere = authenticator(1).with_audience(Audience::new(Audience::MBATCHD, "other"));
        assert!(matches!(
            Credential::verify(&elsewhere, &token, NOW_MS),
            Err(CredentialError::WrongAudience { .. })
        ));
        let key = ClusterKey::from_bytes(&[1; 32]).expect("key");
        let sealer = Authenticator::new(KeyRing::new(&key), AuthConfig::default());
        assert!(matches!(
            Credential::verify(&sealer, &token, NOW_MS),
            Err(CredentialError::NoAudience { .. })
        ));
        let daemon = authenticator(1);
        assert_eq!(Credential::verify(&daemon, &token, NOW_MS), Ok(alice()), "not spent by a refusal");
    }
}
