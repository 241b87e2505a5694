//! Table tests of the sandbox vocabulary, written to kill the mutants `ci/mutants.sh` finds: each
//! row asserts something a user of the crate would notice. One test binary, so a mutation run
//! links it once per mutant.

mod classify;
mod mode;
mod protected;
mod roots;
