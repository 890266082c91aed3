//! Migrations under concurrent start-up.

use scanfleet_core::store::{self, migrate};
use scanfleet_tests::database_url;

/// Regression test for issue 2: `make run` starts the api and the scheduler
/// together, and both migrate the same fresh database at once; the second
/// used to fail creating the migration ledger.
#[tokio::test]
async fn two_processes_migrating_a_fresh_database_at_once_both_succeed() {
    for _ in 0..3 {
        let name = scanfleet_tests::create_database().await;
        let a = store::connect(&database_url(&name)).unwrap();
        let b = store::connect(&database_url(&name)).unwrap();
        let (ra, rb) = tokio::join!(migrate::run(&a), migrate::run(&b));
        ra.unwrap();
        rb.unwrap();
        let applied: i64 = a
            .get()
            .await
            .unwrap()
            .query_one("SELECT count(*) FROM schema_migrations", &[])
            .await
            .unwrap()
            .get(0);
        assert!(applied >= 2, "every migration recorded once: {applied}");
        drop((a, b));
        scanfleet_tests::drop_database(&database_url("postgres"), &name);
    }
}
