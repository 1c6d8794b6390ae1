//! The registry's hash of lock names.

/// A fast hash for the registry's names (FxHash's multiply-rotate, as in
/// `rustc-hash`): every lock and unlock hashes its name twice, and SipHash
/// took more than the rest of the bookkeeping. Not resistant to chosen
/// collisions, which needs many names held at once by this one process; a
/// collision costs a longer probe, not correctness.
#[derive(Clone, Copy, Default)]
pub(super) struct FxBuild;

impl std::hash::BuildHasher for FxBuild {
    type Hasher = FxHasher;

    fn build_hasher(&self) -> FxHasher {
        FxHasher(0)
    }
}

pub(super) struct FxHasher(u64);

impl FxHasher {
    const K: u64 = 0xf135_7aea_2e62_a9c5;

    fn add(&mut self, word: u64) {
        self.0 = self.0.wrapping_add(word).wrapping_mul(Self::K);
    }
}

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(word);
            self.add(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        // The multiply leaves the high bits best mixed; hashbrown takes
        // the bucket from the low ones.
        self.0.rotate_left(26)
    }
}
