//! Payroll files on AWS: the bytes in S3, the file and its digest in DynamoDB, the split on
//! SQS (the `queue-file-split` function, handed the Lambda payload), each chunk made once
//! however often its message is delivered.

use crate::spawn_aws_app;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use ops_domain::ports::{QueueName, QueueTask};
use ops_infra::QueueConsumer;
use ops_runtime::driver::{StreamConsumer, Trigger};
use ops_tests::payroll_csv;
use std::collections::HashSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_is_kept_in_s3_and_split_once_however_often_its_message_comes() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let lines: Vec<(i64, &str)> = (0..1_200)
        .map(|i| (100 * (i + 1), "CLP"))
        .chain([(500, "USD")])
        .collect();
    let bytes = payroll_csv(&lines);
    let uploaded = app
        .upload(
            "/v1/files?workflow=two_step",
            &customer.key,
            "payroll",
            "text/csv",
            bytes.clone(),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    let file_id = uploaded.id();

    // The bytes are in the stack's bucket, as uploaded.
    let stored = app.stored_object(&format!("files/{file_id}.csv")).await;
    assert_eq!(stored, bytes);

    // The transition function queues the split; SQS delivers it twice at once.
    app.driver
        .round(Trigger::Stream(StreamConsumer::Transition))
        .await
        .unwrap();
    let received = app
        .parts
        .queue
        .receive(QueueName::Files, 10, time::Duration::seconds(60))
        .await
        .unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(
        QueueTask::parse(&received[0].body).unwrap(),
        QueueTask::SplitFile {
            file_id: file_id.as_str().into()
        }
    );
    let event = || {
        let mut message = SqsMessage::default();
        message.message_id = Some(received[0].id.clone());
        message.body = Some(received[0].body.clone());
        let mut event = SqsEvent::default();
        event.records = vec![message];
        event
    };
    let (first, second) = tokio::join!(
        ops_runtime::triggers::queue(&app.service, QueueName::Files, event()),
        ops_runtime::triggers::queue(&app.service, QueueName::Files, event())
    );
    assert!(first.batch_item_failures.is_empty() && second.batch_item_failures.is_empty());
    app.settle(time::Duration::ZERO, 1).await;

    let file = app.get(&format!("/v1/files/{file_id}"), &customer.key).await.json();
    assert_eq!(file["status"], "completed", "{file}");
    let made: HashSet<String> = file["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["operation_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(made.len(), 3, "CLP 1000 + 200, USD 1");
    let listed = app.get("/v1/operations?limit=100", &customer.key).await.json();
    let listed: HashSet<String> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, made, "no operation the file does not record");

    // The digest item refuses the same bytes under another key.
    let again = app
        .upload(
            "/v1/files?workflow=two_step",
            &customer.key,
            "payroll-2",
            "text/csv",
            bytes,
        )
        .await;
    assert_eq!(again.error(409)["code"], "duplicate_file");
    let listed = app.get("/v1/files", &customer.key).await.json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
}

/// A pain.001 on AWS: its MsgId held unique by the same conditional item as a CSV's digest,
/// its payment informations split into operations, and its pain.002 read from S3's bytes and
/// DynamoDB's operations and transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pain001_is_one_message_once_and_its_status_report_follows_its_transactions() {
    let app = spawn_aws_app().await;
    let customer = app.create_customer().await;
    let query = "/v1/files?workflow=auto&rail=psp-local:sandbox";
    let blocks: [ops_tests::PaymentInformation; 2] = [
        ("SALARIES", &[("E-1", "150000", "CLP"), ("E-2", "2501", "CLP")]),
        ("SUPPLIERS", &[("E-3", "12.50", "EUR")]),
    ];
    let uploaded = app
        .upload(
            query,
            &customer.key,
            "pain",
            "application/xml",
            ops_tests::pain001("MSG-AWS-1", &blocks),
        )
        .await;
    assert_eq!(uploaded.status, 202, "{}", uploaded.json());
    let file_id = uploaded.id();
    let stored = app.stored_object(&format!("files/{file_id}.xml")).await;
    assert!(stored.starts_with(b"<?xml"));
    let again = ops_tests::pain001("MSG-AWS-1", &[("OTHER", &[("E-9", "1", "CLP")])]);
    let refused = app
        .upload(query, &customer.key, "pain-again", "application/xml", again)
        .await;
    assert_eq!(refused.error(409)["code"], "duplicate_file");

    app.settle(time::Duration::minutes(5), 6).await;
    let file = app.get(&format!("/v1/files/{file_id}"), &customer.key).await.json();
    assert_eq!(file["status"], "completed", "{file}");
    let report = app
        .get(&format!("/v1/files/{file_id}/status_report"), &customer.key)
        .await;
    assert_eq!(report.status, 200);
    let text = String::from_utf8(report.bytes.to_vec()).unwrap();
    let statuses: Vec<&str> = text
        .split("<TxSts>")
        .skip(1)
        .map(|rest| rest.split('<').next().unwrap())
        .collect();
    assert_eq!(statuses, ["ACSC", "RJCT", "ACSC"], "{text}");
    assert!(text.contains("<GrpSts>PART</GrpSts>"), "{text}");
}
