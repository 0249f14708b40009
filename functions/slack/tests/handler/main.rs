//! The slack function's handler against the local AWS world: a fresh
//! table in moto, the Slack stand-in, and runs that really wait.

mod clicks;
mod decisions;
mod refusals;
mod test_world;
