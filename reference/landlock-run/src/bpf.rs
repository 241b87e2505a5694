//! Classic BPF for the launcher's two seccomp programs (the guard in [`crate::harden`], the
//! emulator's notifying filter in [`crate::notify`]): the opcodes and offsets both use, and the
//! block that lets every call no rule names go before a `seccompiler` program looks at it.
//!
//! Why that block: `seccompiler` compiles its rules as a chain, one syscall number after another,
//! so a call no rule names walks the whole chain before it is allowed. The kernel walks it too
//! when it installs a program: it runs the program once for every syscall number (the filter
//! cache, which lets later calls that are always allowed skip the filter), under a lock with
//! interrupts off. With the chain that was most of what the two `seccomp(2)` calls cost, about a
//! tenth of the CPU of a no-op command through the launcher. The block decides with a few
//! comparisons (a search tree over the named numbers) and falls through to the chain only for a
//! number some rule names.

use seccompiler::sock_filter;

/// `BPF_LD | BPF_W | BPF_ABS`: load the 32-bit word at offset `k` of `struct seccomp_data`.
pub(crate) const BPF_LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`: jump `jt` ahead if A == k, else `jf`.
pub(crate) const BPF_JEQ_K: u16 = 0x05 | 0x10;
/// `BPF_JMP | BPF_JGE | BPF_K`: jump `jt` ahead if A >= k (unsigned), else `jf`.
pub(crate) const BPF_JGE_K: u16 = 0x05 | 0x30;
/// `BPF_RET | BPF_K`: return `k`.
pub(crate) const BPF_RET_K: u16 = 0x06;
/// `struct seccomp_data`'s `nr` (linux/seccomp.h).
pub(crate) const OFFSET_NR: u32 = 0;
/// `struct seccomp_data`'s `arch`.
pub(crate) const OFFSET_ARCH: u32 = 4;

/// The `AUDIT_ARCH_*` value of the native ABI, as `seccomp_data.arch` carries it
/// (linux/audit.h: `EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`).
#[cfg(target_arch = "x86_64")]
pub(crate) const AUDIT_ARCH_NATIVE: u32 = 62 | 0x8000_0000 | 0x4000_0000; // EM_X86_64
#[cfg(target_arch = "aarch64")]
pub(crate) const AUDIT_ARCH_NATIVE: u32 = 183 | 0x8000_0000 | 0x4000_0000; // EM_AARCH64

/// One instruction without jumps.
pub(crate) fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// One conditional jump (offsets count the instructions after it).
pub(crate) fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// Where a jump of the search tree goes before offsets are known.
#[derive(Clone, Copy)]
enum Target {
    /// The next instruction.
    Next,
    /// The number is named: on to what follows the block.
    Named,
    /// The number is not named: the block's `RET ALLOW`.
    Unnamed,
    /// An instruction of the tree.
    At(usize),
}

/// A comparison of the tree, its jumps still symbolic.
struct Node {
    code: u16,
    k: u32,
    jt: Target,
    jf: Target,
}

/// The block that returns `SECCOMP_RET_ALLOW` for every call of the native architecture whose
/// number is not in `named`, and falls through to what follows it for the rest (a named number,
/// or a call of another architecture). Put before a program that allows every number its rules
/// do not name, it changes no answer. Errs only if the tree outgrows a jump (more than about 150
/// numbers). Empty where the native architecture's audit value is not known here (the chain
/// then decides alone, as before).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) fn allow_unnamed(
    _named: impl IntoIterator<Item = i64>,
) -> Result<Vec<sock_filter>, String> {
    Ok(Vec::new())
}

/// The block (see the other cfg): allows the native calls no rule names, falls through for the
/// rest.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) fn allow_unnamed(
    named: impl IntoIterator<Item = i64>,
) -> Result<Vec<sock_filter>, String> {
    let mut keys: Vec<u32> = named
        .into_iter()
        .map(|n| u32::try_from(n).map_err(|_| format!("syscall number {n} out of range")))
        .collect::<Result<_, _>>()?;
    keys.sort_unstable();
    keys.dedup();
    let mut tree = Vec::new();
    search(&keys, &mut tree);
    // ld arch; jeq native (else on past the block); ld nr; the tree; ret allow.
    const HEAD: usize = 3;
    let allow = HEAD + tree.len();
    let end = allow + 1;
    let offset = |from: usize, to: usize| {
        u8::try_from(to - from - 1).map_err(|_| "the seccomp search tree is too large".to_string())
    };
    let mut block = vec![
        stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH_NATIVE, 0, offset(1, end)?),
        stmt(BPF_LD_W_ABS, OFFSET_NR),
    ];
    for (i, node) in tree.iter().enumerate() {
        let at = HEAD + i;
        let resolve = |t: Target| match t {
            Target::Next => Ok(0),
            Target::Named => offset(at, end),
            Target::Unnamed => offset(at, allow),
            Target::At(j) => offset(at, HEAD + j),
        };
        block.push(jump(
            node.code,
            node.k,
            resolve(node.jt)?,
            resolve(node.jf)?,
        ));
    }
    block.push(stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW));
    Ok(block)
}

/// A search over sorted `keys`: split in halves with `jge`, a few `jeq`s at the leaves; every
/// path ends in a jump to `Named` or `Unnamed`.
fn search(keys: &[u32], out: &mut Vec<Node>) {
    if keys.len() <= 3 {
        for (i, &k) in keys.iter().enumerate() {
            let last = i + 1 == keys.len();
            out.push(Node {
                code: BPF_JEQ_K,
                k,
                jt: Target::Named,
                jf: if last { Target::Unnamed } else { Target::Next },
            });
        }
        return;
    }
    let mid = keys.len() / 2;
    let split = out.len();
    out.push(Node {
        code: BPF_JGE_K,
        k: keys[mid],
        jt: Target::Next, // set below, once the upper half's start is known
        jf: Target::Next,
    });
    search(&keys[..mid], out);
    out[split].jt = Target::At(out.len());
    search(&keys[mid..], out);
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    use super::*;

    /// What a program did with one call: returned `k`, or ran off its end (into what follows).
    #[derive(Debug, PartialEq)]
    enum Ran {
        Returned(u32),
        FellThrough,
    }

    /// A classic-BPF interpreter for the four instructions the block uses.
    fn run(prog: &[sock_filter], nr: u32, arch: u32) -> Ran {
        let (mut pc, mut a) = (0usize, 0u32);
        while pc < prog.len() {
            let insn = &prog[pc];
            pc += 1;
            match insn.code {
                BPF_LD_W_ABS => {
                    a = match insn.k {
                        OFFSET_NR => nr,
                        OFFSET_ARCH => arch,
                        k => panic!("loads offset {k}"),
                    }
                }
                BPF_JEQ_K | BPF_JGE_K => {
                    let taken = if insn.code == BPF_JEQ_K {
                        a == insn.k
                    } else {
                        a >= insn.k
                    };
                    pc += usize::from(if taken { insn.jt } else { insn.jf });
                }
                BPF_RET_K => return Ran::Returned(insn.k),
                code => panic!("unknown opcode {code:#x}"),
            }
        }
        assert_eq!(pc, prog.len(), "a jump past the block's end");
        Ran::FellThrough
    }

    /// Every number up to past the table, and x32's and the tracer's skip, for key sets of
    /// every size up to 80: named numbers fall through, others are allowed, other
    /// architectures fall through.
    #[test]
    fn the_block_allows_exactly_the_numbers_no_rule_names() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        for size in 0..80 {
            let mut keys = Vec::new();
            for _ in 0..size {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                keys.push((rng % 470) as i64);
            }
            let block = allow_unnamed(keys.iter().copied()).expect("block");
            let probes = (0..520).chain([0x4000_0000, 0x4000_0101, u32::MAX]);
            for nr in probes {
                let named = keys.contains(&i64::from(nr));
                let expected = if named {
                    Ran::FellThrough
                } else {
                    Ran::Returned(libc::SECCOMP_RET_ALLOW)
                };
                assert_eq!(
                    run(&block, nr, AUDIT_ARCH_NATIVE),
                    expected,
                    "nr {nr}, keys {keys:?}"
                );
                assert_eq!(
                    run(&block, nr, 0x4000_0003),
                    Ran::FellThrough,
                    "foreign arch"
                );
            }
        }
    }

    /// The launcher's own rule sets are far from the tree's limit.
    #[test]
    fn a_large_rule_set_still_fits_the_jumps() {
        assert!(allow_unnamed(0..150).is_ok());
    }
}
