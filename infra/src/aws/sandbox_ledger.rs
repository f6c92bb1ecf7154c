//! The sandbox rail's ledger in the stack's table: every function of a deployed test stack
//! (the submit worker, the status poll) asks the same rail. Each method is one `UpdateItem`
//! or a query of the ledger's one partition.

use super::keys;
use crate::rails::{SandboxEntry, SandboxLedger};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;
use ops_domain::rail::{Instruction, RailDirection, RailError};
use std::collections::HashMap;
use time::Date;

pub struct DynamoSandboxLedger {
    client: Client,
    table: String,
}

type Item = HashMap<String, AttributeValue>;

fn rail_error(e: impl std::fmt::Display) -> RailError {
    RailError::Transient(format!("sandbox ledger: {e}"))
}

fn key(transaction_id: &str) -> Item {
    let key = keys::sandbox_entry(transaction_id);
    HashMap::from([
        ("PK".to_owned(), AttributeValue::S(key.pk)),
        ("SK".to_owned(), AttributeValue::S(key.sk)),
    ])
}

fn number(item: &Item, name: &str) -> Result<i64, RailError> {
    match item.get(name) {
        None => Ok(0),
        Some(AttributeValue::N(n)) => n.parse().map_err(rail_error),
        Some(other) => Err(rail_error(format!("{name} is {other:?}"))),
    }
}

fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name).and_then(|v| v.as_s().ok()).map(String::as_str)
}

fn entry(item: &Item) -> Result<SandboxEntry, RailError> {
    let count = |name: &str| number(item, name).and_then(|n| u32::try_from(n).map_err(rail_error));
    Ok(SandboxEntry {
        transaction_id: text(item, "transaction_id").unwrap_or_default().to_owned(),
        amount: number(item, "amount")?,
        currency: text(item, "currency").unwrap_or_default().to_owned(),
        submit_calls: count("submit_calls")?,
        duplicate_submits: count("duplicate_submits")?,
        accepted: number(item, "accepted")? == 1,
        accepted_on: text(item, "accepted_on")
            .map(|day| Date::parse(day, time::macros::format_description!("[year]-[month]-[day]")))
            .transpose()
            .map_err(rail_error)?,
        status_calls: count("status_calls")?,
        direction: text(item, "direction")
            .and_then(RailDirection::parse)
            .unwrap_or_default(),
    })
}

impl DynamoSandboxLedger {
    pub fn new(client: Client, table: impl Into<String>) -> DynamoSandboxLedger {
        DynamoSandboxLedger {
            client,
            table: table.into(),
        }
    }
}

#[async_trait]
impl SandboxLedger for DynamoSandboxLedger {
    async fn count_submit(&self, instruction: &Instruction) -> Result<SandboxEntry, RailError> {
        // Every operand reads the item as it was, so a duplicate is counted against whether
        // the instruction had been accepted before this submit.
        let counted = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(instruction.transaction_id.as_str())))
            .update_expression(
                "SET entity = :entity, transaction_id = :id, amount = if_not_exists(amount, :amount),
                     currency = if_not_exists(currency, :currency),
                     direction = if_not_exists(direction, :direction),
                     submit_calls = if_not_exists(submit_calls, :zero) + :one,
                     duplicate_submits = if_not_exists(duplicate_submits, :zero) + if_not_exists(accepted, :zero)",
            )
            .expression_attribute_values(":entity", AttributeValue::S("sandbox_entry".into()))
            .expression_attribute_values(":id", AttributeValue::S(instruction.transaction_id.to_string()))
            .expression_attribute_values(
                ":amount",
                AttributeValue::N(instruction.amount.minor_units().to_string()),
            )
            .expression_attribute_values(":currency", AttributeValue::S(instruction.currency.code().to_owned()))
            .expression_attribute_values(
                ":direction",
                AttributeValue::S(instruction.direction.as_str().to_owned()),
            )
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| rail_error(e.into_service_error()))?;
        entry(
            counted
                .attributes()
                .ok_or_else(|| rail_error("no attributes returned"))?,
        )
    }

    async fn accept(&self, transaction_id: &str, day: Date) -> Result<(), RailError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(transaction_id)))
            .update_expression("SET accepted = :one, accepted_on = :day")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":day", AttributeValue::S(day.to_string()))
            .send()
            .await
            .map_err(|e| rail_error(e.into_service_error()))?;
        Ok(())
    }

    async fn count_status(&self, transaction_id: &str) -> Result<Option<SandboxEntry>, RailError> {
        let counted = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(transaction_id)))
            .update_expression("SET status_calls = if_not_exists(status_calls, :zero) + :one")
            .condition_expression("attribute_exists(PK)")
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match counted.map_err(SdkError::into_service_error) {
            Ok(counted) => entry(
                counted
                    .attributes()
                    .ok_or_else(|| rail_error("no attributes returned"))?,
            )
            .map(Some),
            Err(UpdateItemError::ConditionalCheckFailedException(_)) => Ok(None),
            Err(other) => Err(rail_error(other)),
        }
    }

    async fn entries(&self) -> Result<Vec<SandboxEntry>, RailError> {
        let pages = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(keys::SANDBOX_LEDGER.into()))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let items: Vec<Item> = pages.collect::<Result<_, _>>().await.map_err(rail_error)?;
        items.iter().map(entry).collect()
    }
}
