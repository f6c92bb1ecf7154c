//! Tallies on the SQLite file: one row per period, customer and series, added to in the
//! changeset of what it counts.

use super::*;
use async_trait::async_trait;
use ops_domain::ids::CustomerId;
use ops_domain::tallies::{Period, Series, Tally, TallyCount, TallyStore};

pub(super) fn add(tx: &Connection, tally: &Tally) -> Result<(), TxError> {
    tx.run(
        "INSERT INTO tallies (period, customer_id, series, count) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (period, customer_id, series) DO UPDATE SET count = count + excluded.count",
        params![
            tally.period_key(),
            tally.customer_id.as_str(),
            tally.series.key(),
            tally.count
        ],
    )?;
    Ok(())
}

#[async_trait]
impl TallyStore for SqliteStore {
    async fn tallies(
        &self,
        customer_id: Option<&CustomerId>,
        period: Period,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<TallyCount>, StoreError> {
        let (first, end) = (period.key(from), period.key(to));
        let owner = customer_id.map(|c| c.to_string());
        self.read(move |c| {
            let sql = "SELECT period, series, sum(count) FROM tallies
                       WHERE period >= ?1 AND period < ?2 AND (?3 IS NULL OR customer_id = ?3)
                       GROUP BY period, series";
            let mut statement = c.prepare_cached(sql).map_err(unavailable)?;
            let rows = statement
                .query_map(params![first, end, owner], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                })
                .map_err(unavailable)?;
            let mut counts = vec![];
            for row in rows {
                let (period, series, count) = row.map_err(unavailable)?;
                // A row this version cannot read (a later one's series) is not counted.
                if let (Some((_, starts_at)), Some(series)) = (Period::start_of_key(&period), Series::of_key(&series)) {
                    counts.push(TallyCount {
                        starts_at,
                        series,
                        count,
                    });
                }
            }
            Ok(counts)
        })
        .await
    }
}
