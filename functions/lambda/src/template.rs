//! The API's functions in `template.yaml`, made from the endpoint list: one function per
//! endpoint, named after it, running its bootstrap, routed as it is, reading the table for a
//! `GET` and writing it otherwise, and granted what [`grants`] says it needs beyond that and
//! the service's secrets. The template holds them between [`BEGIN`] and [`END`];
//! `cargo run -p ops-lambda --example template` writes them there, and a test fails when the
//! template differs. A new endpoint cannot compile until [`grants`] says what it may reach.

use crate::Function;
use ops_api::Endpoint;

/// The line before the API's functions in `template.yaml`.
pub const BEGIN: &str = "  # The API's functions, one per endpoint, written by `cargo run -p ops-lambda --example template`\n  # from the endpoint list (functions/lambda/src/template.rs): edit that, not these.\n";
/// The line after them.
pub const END: &str = "  # End of the API's functions.\n";

/// What an endpoint's function may reach besides the table and the service's secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Puts an answer over Lambda's payload limit in the files bucket, behind a link.
    AnswersInS3,
    /// Sends deliveries to the webhooks queue.
    SendWebhooks,
    /// Makes, replaces and deletes webhook signing secrets.
    KeepSigningSecrets,
    /// Deletes webhook signing secrets.
    DeleteSigningSecrets,
    /// Sends a dead letter back to its queue, or a delivery to the webhooks queue.
    Redrive,
    /// Keeps an uploaded file's bytes.
    PutFiles,
    /// Reads an uploaded file's bytes back.
    GetFiles,
    /// Keeps a statement's bytes.
    PutStatements,
    /// Reads a statement's bytes back.
    GetStatements,
    /// Reads a file rail's bank files back.
    GetBankFiles,
}

impl Grant {
    /// The grant as the function's `Policies` entries.
    fn policies(self) -> String {
        match self {
            Grant::AnswersInS3 => {
                let why = "        # Answers over Lambda's payload limit go to S3 behind a short-lived link.\n";
                format!("{why}{}", statement("[s3:PutObject, s3:GetObject]", BUCKET_ANSWERS))
            }
            Grant::SendWebhooks => send_to("WebhooksQueue"),
            Grant::KeepSigningSecrets => statement(
                "[secretsmanager:CreateSecret, secretsmanager:PutSecretValue, secretsmanager:DeleteSecret]",
                SIGNING_SECRETS,
            ),
            Grant::DeleteSigningSecrets => statement("secretsmanager:DeleteSecret", SIGNING_SECRETS),
            Grant::Redrive => {
                let why = "        # A redrive sends a dead letter back to its queue; a resend queues a delivery.\n";
                let queues: String = ["SubmissionsQueue", "WebhooksQueue", "FilesQueue"]
                    .map(send_to)
                    .concat();
                format!("{why}{queues}")
            }
            Grant::PutFiles => statement("s3:PutObject", BUCKET_FILES),
            Grant::GetFiles => statement("s3:GetObject", BUCKET_FILES),
            Grant::PutStatements => statement("s3:PutObject", BUCKET_STATEMENTS),
            Grant::GetStatements => statement("s3:GetObject", BUCKET_STATEMENTS),
            Grant::GetBankFiles => statement("s3:GetObject", BUCKET_BANK_FILES),
        }
    }
}

const BUCKET_ANSWERS: &str = "!Sub \"${FilesBucket.Arn}/answers/*\"";
const BUCKET_FILES: &str = "!Sub \"${FilesBucket.Arn}/files/*\"";
const BUCKET_STATEMENTS: &str = "!Sub \"${FilesBucket.Arn}/reconciliations/*\"";
const BUCKET_BANK_FILES: &str = "!Sub \"${FilesBucket.Arn}/bank_files/*\"";
/// This environment's webhook signing secrets (a stack's own, not another environment's).
const SIGNING_SECRETS: &str =
    "!Sub \"arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:ops/${Environment}/webhook/*\"";

/// A statement allowing `action` on `resource`.
fn statement(action: &str, resource: &str) -> String {
    format!("        - Statement:\n            - Effect: Allow\n              Action: {action}\n              Resource: {resource}\n")
}

/// SAM's policy template for sending to one of the stack's queues.
fn send_to(queue: &str) -> String {
    format!("        - SQSSendMessagePolicy:\n            QueueName: !GetAtt {queue}.QueueName\n")
}

/// A function's size when the default (the `Globals`' memory and timeout) is not enough: why,
/// its timeout in seconds (the API's 29 at most) and its memory in MB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    pub why: Option<&'static str>,
    pub timeout: Option<u32>,
    pub memory: u32,
}

/// What `endpoint`'s function may reach beyond the table and the service's secrets, and its
/// size if not the default.
pub fn grants(endpoint: Endpoint) -> (&'static [Grant], Option<Sizing>) {
    use Endpoint::*;
    let report = |why| Sizing {
        why: Some(why),
        timeout: Some(29),
        memory: 512,
    };
    match endpoint {
        ListOperations | ListEvents => (&[Grant::AnswersInS3], None),
        OperationsReport => (
            &[Grant::AnswersInS3],
            Some(report("A period's operations, read a page at a time.")),
        ),
        TransactionsReport => (
            &[Grant::AnswersInS3],
            Some(report(
                "A period's operations' transactions, read a page of operations at a time.",
            )),
        ),
        MovementsReport => (
            &[Grant::AnswersInS3],
            Some(report(
                "A customer's movements in a period, read a page at a time from each account.",
            )),
        ),
        ResendEvent | RecoverWebhookEndpoint | EnableWebhookEndpoint => (&[Grant::SendWebhooks], None),
        CreateWebhookEndpoint | RotateWebhookSecret => (&[Grant::KeepSigningSecrets], None),
        DeleteWebhookEndpoint => (&[Grant::DeleteSigningSecrets], None),
        ResolveWorkItem => (&[Grant::Redrive], None),
        UploadFile => (&[Grant::PutFiles], None),
        GetBankFile => (&[Grant::GetBankFiles], None),
        FileStatusReport => (
            &[Grant::GetFiles],
            Some(report(
                "A pain.001's transactions read again, with each of its operations' transactions.",
            )),
        ),
        ImportStatement => (
            &[Grant::PutStatements],
            Some(Sizing {
                why: Some("A statement of up to 4 MiB is read, matched and kept in one request."),
                timeout: Some(29),
                memory: 1024,
            }),
        ),
        ReconciliationLines => (
            &[Grant::GetStatements],
            Some(Sizing {
                why: None,
                timeout: None,
                memory: 512,
            }),
        ),
        Health
        | BoardPage
        | ConsolePage
        | OpenApi
        | CreateCustomer
        | ListCustomers
        | GetCustomer
        | UpdateCustomer
        | CustomerHistory
        | CreateUser
        | ListUsers
        | GetUser
        | UpdateUser
        | UserHistory
        | DelegateApprovals
        | EndDelegation
        | CreateApiKey
        | ListApiKeys
        | GetApprovalFloor
        | ApprovalFloorHistory
        | PutApprovalFloor
        | GetPayoutLimits
        | PutPayoutLimits
        | RevokeApiKey
        | RotateApiKey
        | ApiKeyHistory
        | ListWorkflows
        | GetWorkflow
        | WorkflowHistory
        | PutWorkflow
        | CreateOperation
        | GetOperation
        | ApproveOperation
        | RejectOperation
        | CancelOperation
        | ReverseOperation
        | OperationHistory
        | OperationDeliveries
        | ListTransactions
        | GetTransaction
        | RetryTransaction
        | ResolveTransaction
        | CancelTransaction
        | GetEvent
        | EventDeliveries
        | WebhookEndpointHealth
        | WebhookEndpointFailedDeliveries
        | ListWebhookEndpoints
        | GetWebhookEndpoint
        | UpdateWebhookEndpoint
        | WebhookEndpointHistory
        | RailReport
        | CreateSchedule
        | ListSchedules
        | GetSchedule
        | DeleteSchedule
        | PauseSchedule
        | ResumeSchedule
        | BackfillSchedule
        | ScheduleOccurrences
        | CreateAccount
        | ListAccounts
        | GetAccount
        | AccountMovements
        | AdjustAccount
        | Board
        | Charts
        | ListWorkItems
        | ClaimWorkItem
        | GetWorkItem
        | AssignWorkItem
        | ReleaseWorkItem
        | ApproveOperations
        | RejectOperations
        | ListFiles
        | GetFile
        | ListReconciliations
        | GetReconciliation
        | CreateCalendar
        | GetCalendar
        | ImportHolidays
        | PutRailCutoffs
        | NextCutoff
        | GetReconciliationRules
        | PutReconciliationRules
        | ReconciliationRulesHistory => (&[], None),
    }
}

/// `endpoint`'s function as `template.yaml` declares it.
pub fn function_block(endpoint: Endpoint) -> String {
    let function = Function::Endpoint(endpoint);
    let (method, path) = endpoint.method_and_path();
    let table = if method == "GET" {
        "TableReadAccess"
    } else {
        "TableWriteAccess"
    };
    let (grants, sizing) = grants(endpoint);
    let mut sized = String::new();
    if let Some(sizing) = sizing {
        if let Some(why) = sizing.why {
            sized += &format!("      # {why}\n");
        }
        if let Some(timeout) = sizing.timeout {
            sized += &format!("      Timeout: {timeout}\n");
        }
        sized += &format!("      MemorySize: {}\n", sizing.memory);
    }
    let granted: String = grants.iter().map(|grant| grant.policies()).collect::<Vec<_>>().concat();
    format!(
        "  {name}Function:
    # checkov:skip=CKV_AWS_117:No VPC: it calls AWS APIs and the rails' public endpoints only.
    # checkov:skip=CKV_AWS_173:Its variables name resources and settings; secrets are in Secrets Manager.
    # checkov:skip=CKV_AWS_115:The API stage's throttle bounds it; a reservation per endpoint would starve the others.
    # checkov:skip=CKV_AWS_116:Invoked synchronously by API Gateway: a failure is the caller's answer.
    Type: AWS::Serverless::Function
    Metadata:
      BuildMethod: rust-cargolambda
      BuildProperties:
        Binary: {binary}
    Properties:
      Handler: {handler}
      Description: \"{method} {path}\"
{sized}      Policies:
        - !Ref {table}
        - !Ref ServiceSecretsAccess
{granted}      Events:
        Api:
          Type: HttpApi
          Properties:
            ApiId: !Ref HttpApi
            Method: {method}
            Path: {path}
",
        name = endpoint.name(),
        binary = function.binary(),
        handler = function.handler(),
    )
}

/// Every endpoint's function, in the endpoint list's order, between the markers.
pub fn api_functions() -> String {
    let blocks: Vec<String> = Endpoint::ALL.iter().map(|e| function_block(*e)).collect();
    format!("{BEGIN}{}{END}", blocks.join("\n"))
}

/// `template` with its API functions as the endpoint list makes them; an error when it lacks
/// the markers.
pub fn with_api_functions(template: &str) -> Result<String, String> {
    let start = template
        .find(BEGIN)
        .ok_or("template.yaml has no line opening the API's functions")?;
    let end = template[start..]
        .find(END)
        .map(|at| start + at + END.len())
        .ok_or("template.yaml has no line closing the API's functions")?;
    Ok(format!("{}{}{}", &template[..start], api_functions(), &template[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_functions_between_the_markers_are_replaced_and_the_rest_kept() {
        let stale = format!("Resources:\n{BEGIN}  Stale:\n    Type: X\n{END}\n  Other:\n");
        let made = with_api_functions(&stale).unwrap();
        assert_eq!(made, format!("Resources:\n{}\n  Other:\n", api_functions()));
        assert_eq!(with_api_functions(&made).unwrap(), made, "written twice, the same");
        assert!(with_api_functions("Resources:\n").is_err());
    }

    #[test]
    fn a_read_reads_the_table_and_a_change_writes_it_with_only_its_grants() {
        let list = function_block(Endpoint::ListOperations);
        assert!(list.contains("        - !Ref TableReadAccess\n") && list.contains("/answers/*"));
        let create = function_block(Endpoint::CreateWebhookEndpoint);
        assert!(create.contains("        - !Ref TableWriteAccess\n"));
        assert!(create.contains("secretsmanager:CreateSecret") && !create.contains("s3:"));
        let upload = function_block(Endpoint::UploadFile);
        assert!(upload.contains("Action: s3:PutObject\n") && upload.contains("/files/*"));
        assert!(!function_block(Endpoint::GetOperation).contains("Statement"));
    }
}
