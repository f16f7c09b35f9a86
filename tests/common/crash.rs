//! What the crash tests share: how many kills, and the seedable generator for their choices and
//! delays (which the tests that generate data use as well).

/// xorshift64*: small and seedable, so that a run's choices can be replayed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `$SESSIONDB_CRASH_KILLS` (the long form), else `ci_kills`; and a generator seeded from
/// `$SESSIONDB_CRASH_SEED`, else the clock (the seed is printed).
pub fn plan(ci_kills: u32) -> (u32, Rng) {
    let kills = std::env::var("SESSIONDB_CRASH_KILLS").ok().and_then(|k| k.parse().ok()).unwrap_or(ci_kills);
    let seed = std::env::var("SESSIONDB_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1);
    println!("seed {seed} (SESSIONDB_CRASH_SEED={seed} replays it)");
    (kills, Rng(seed))
}
