//! Keys and values of the index workloads (public so tests can locate a key in an image).
//!
//! Key `id` of a run with seed `s` has a 64-bit *key word* (a bijective mix of `id` and `s`, so
//! words never collide within a run). The word is the key's first 8 bytes and serves as its hash
//! and as the slice trees compare; the remaining `key_size - 8` bytes are derived from it. Values
//! are derived from the word too, so a recovery can tell a written value from garbage.

/// SplitMix64 finaliser: a bijection on u64.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key word of key `id` under `seed`.
pub fn key_word(seed: u64, id: u64) -> u64 {
    mix64(id.wrapping_add(mix64(seed ^ 0x005E_ED0F_1DE8)))
}

/// Whether a key word is usable (the structures reserve 0 and a few top values as markers).
pub fn usable(word: u64) -> bool {
    word > 0xff && word < u64::MAX - 0xff
}

/// Second, independent hash of a key word (CCEH's second probing position).
pub fn hash2(word: u64) -> u64 {
    mix64(word ^ 0xC706_97C7_0697)
}

fn derived(word: u64, salt: u64, len: usize) -> Vec<u8> {
    (0..len.div_ceil(8) as u64).flat_map(|i| mix64(word ^ salt.wrapping_add(i)).to_le_bytes()).take(len).collect()
}

/// The full key: the word (little-endian) then derived bytes.
pub fn key_bytes(word: u64, key_size: usize) -> Vec<u8> {
    let mut k = word.to_le_bytes().to_vec();
    k.extend(derived(word, 0x4B45_5900, key_size.saturating_sub(8)));
    k.truncate(key_size.max(8));
    k
}

/// The value stored with a key.
pub fn value_bytes(word: u64, value_size: usize) -> Vec<u8> {
    derived(word, 0x5641_4C00, value_size)
}

/// A value record as written in PM: key bytes then value bytes.
pub fn record_bytes(word: u64, key_size: usize, value_size: usize) -> Vec<u8> {
    let mut r = key_bytes(word, key_size);
    r.extend(value_bytes(word, value_size));
    r
}
