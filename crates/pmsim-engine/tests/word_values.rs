//! Word values are kept once per (word, store) beside the identities the persist paths carry:
//! the crash image must still hold every word's exact bytes, partial-word stores included.

use pmsim_engine::crash::image;
use pmsim_engine::{simulator, Config};
use pmsim_trace::text::parse_str;
use std::sync::Arc;

const X: u64 = 0x1_0000_0000;

#[test]
fn crash_image_holds_each_words_bytes_after_partial_stores() {
    let src = format!(
        "# pmsim trace v1\nthreads 1\n\
         T0 store {X:#x} 8 1122334455667788\n\
         T0 store {:#x} 2 aabb\n\
         T0 store {:#x} 8 0\n\
         T0 store {:#x} 4 deadbeef\n\
         T0 ofence\n\
         T0 store {:#x} 8 0102030405060708\n\
         T0 store {:#x} 1 ff\n\
         T0 store {:#x} 1 ee\n\
         T0 dfence\n",
        X + 2,
        X + 8,
        X + 16,
        X + 64,
        X + 64 + 7,
        X + 64,
    );
    let t = Arc::new(parse_str("values.trace", &src).unwrap());
    // Little-endian bytes, hand-merged: each partial store replaces only the bytes it covers.
    let want = [
        (X, 0x1122_3344_aabb_7788u64, 1u64),
        (X + 8, 0, 2),
        (X + 16, 0xdead_beef, 3),
        (X + 64, 0xff02_0304_0506_07ee, 7),
    ];
    for d in ["baseline", "eadr", "bbb", "hops-rp", "asap-rp", "asap-ep"] {
        let mut s = simulator(&t, &Config::default(), d, true, false).unwrap();
        s.run().unwrap();
        let img = image(&s);
        for (w, data, gid) in want {
            let v = img.words.get(&w).copied().unwrap_or_else(|| panic!("{d}: word {w:#x} missing"));
            assert_eq!((v.data, v.id), (data, gid), "{d}: word {w:#x}");
        }
        if d != "eadr" {
            // The designs that write through to NVM: what the media holds has the same bytes.
            for (w, data, gid) in want {
                let v = s.m.nvm_word(w).unwrap();
                assert_eq!((v.data, v.id), (data, gid), "{d}: NVM word {w:#x}");
            }
        }
    }
}
