//! Every scenario case against every reference backend, one libtest trial each.

fn main() {
    conformance::harness::main()
}
