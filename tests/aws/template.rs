//! `template.yaml` cannot drift from the code: every endpoint and trigger is a function, every API
//! function routes the method and path its handler serves, the table has every index the store
//! queries, and the queues dead-letter as the embedded ones do.

use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn template() -> String {
    std::fs::read_to_string(repository().join("template.yaml")).unwrap()
}

/// What follows `key` on each line that starts with it (indentation aside), in order.
fn values_of<'a>(template: &'a str, key: &str) -> Vec<&'a str> {
    template
        .lines()
        .filter_map(|line| line.trim().strip_prefix(key))
        .collect()
}

/// Each function's block, its lines unindented. Resources are the lines indented by exactly
/// two spaces; each block runs to the next.
fn functions(template: &str) -> Vec<String> {
    let mut blocks: Vec<String> = vec![];
    for line in template.lines() {
        if line.starts_with("  ") && !line.starts_with("   ") {
            blocks.push(String::new());
        }
        if let Some(block) = blocks.last_mut() {
            block.push_str(line.trim_start());
            block.push('\n');
        }
    }
    blocks.retain(|b| b.contains("BuildMethod: rust-cargolambda"));
    blocks
}

#[test]
fn every_function_runs_one_handler_of_its_kinds_bootstrap_with_its_route() {
    let blocks = functions(&template());
    let mut handlers = vec![];
    for block in &blocks {
        let handler = values_of(block, "Handler: ");
        let [handler] = handler.as_slice() else {
            panic!("a function names one Handler: {block}")
        };
        let function = ops_lambda::Function::named(handler)
            .unwrap_or_else(|| panic!("no bootstrap runs anything named {handler}"));
        assert!(
            block.contains(&format!("Binary: {}\n", function.binary())),
            "an endpoint ships its bootstrap's file (ops-api or ops-schedules), a trigger ops-triggers: {block}"
        );
        if let ops_lambda::Function::Endpoint(endpoint) = function {
            let (method, path) = endpoint.method_and_path();
            assert!(
                block.contains(&format!("Method: {method}\n")) && block.contains(&format!("Path: {path}\n")),
                "{handler} must route {method} {path}"
            );
        }
        handlers.push(handler.to_string());
    }
    let mut expected: Vec<String> = ops_lambda::Function::all().map(|f| f.handler()).collect();
    expected.sort();
    handlers.sort();
    assert_eq!(handlers, expected, "one function per endpoint and per trigger");
    assert_eq!(
        handlers.len(),
        ops_api::Endpoint::ALL.len() + ops_runtime::driver::Trigger::ALL.len() + 2,
        "and the two invoked by hand: the replay of failed stream batches, a new stack's first key"
    );
}

#[test]
fn the_table_has_every_index_the_store_queries() {
    let template = template();
    assert_eq!(values_of(&template, "- IndexName: "), ops_infra::aws::INDEXES);
    for index in ops_infra::aws::INDEXES {
        for key in ["PK", "SK"] {
            let attribute = format!("{{ AttributeName: {index}{key}, AttributeType: S }}");
            assert!(template.contains(&attribute), "{attribute} is not defined");
        }
    }
    let projected = format!(
        "Projection: {{ ProjectionType: INCLUDE, NonKeyAttributes: [{}] }}",
        ops_infra::aws::PROJECTED.join(", ")
    );
    assert_eq!(
        template.matches(&projected).count(),
        ops_infra::aws::INDEXES.len(),
        "{projected}"
    );
}

#[test]
fn queues_dead_letter_after_as_many_receives_as_the_embedded_ones() {
    let expected = ops_domain::ports::MAX_RECEIVES.to_string();
    assert_eq!(
        values_of(&template(), "maxReceiveCount: "),
        [expected.as_str(), expected.as_str(), expected.as_str()],
        "submissions, webhooks and files queues"
    );
}

/// A create's idempotency record is taken over once its lock has passed, on the grounds that
/// its writer, an API function, has been stopped by then (see the store's `key_first`).
#[test]
fn api_functions_time_out_before_an_idempotency_claim_does() {
    let template = template();
    let limit = ops_domain::idempotency::CLAIM_TIMEOUT.whole_seconds();
    let default: i64 = block(&template, "  Function:")
        .lines()
        .find_map(|line| line.trim().strip_prefix("Timeout: "))
        .expect("a default timeout")
        .parse()
        .unwrap();
    let api = functions(&template);
    let api: Vec<&String> = api.iter().filter(|f| f.contains("Handler: api-")).collect();
    assert!(api.len() > 30, "{} API functions", api.len());
    for function in api {
        let timeout = values_of(function, "Timeout: ")
            .first()
            .map_or(default, |t| t.parse().unwrap());
        assert!(timeout < limit, "{timeout} s is not under {limit} s: {function}");
    }
}

/// Each alarm of the template: its name and its block's lines.
fn alarms(template: &str) -> Vec<(&str, String)> {
    let lines: Vec<&str> = template.lines().collect();
    lines
        .windows(2)
        .filter(|pair| pair[1].trim() == "Type: AWS::CloudWatch::Alarm")
        .map(|pair| (pair[0].trim().trim_end_matches(':'), block(template, pair[0])))
        .collect()
}

/// The lines of the block `header` opens: those after it indented further than it.
fn block(template: &str, header: &str) -> String {
    let indent = |line: &str| line.len() - line.trim_start().len();
    template
        .lines()
        .skip_while(|line| *line != header)
        .skip(1)
        .take_while(|line| line.trim().is_empty() || indent(line) > indent(header))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn functions_are_given_every_setting_they_read() {
    let template = template();
    let variables = block(&template, "    Environment:");
    let required = |name: &str| match name {
        "OPS_ENVIRONMENT" => Some("test".to_owned()),
        "TABLE_NAME"
        | "SUBMISSIONS_QUEUE_URL"
        | "WEBHOOKS_QUEUE_URL"
        | "FILES_QUEUE_URL"
        | "FILES_BUCKET"
        | "SECRETS_PREFIX" => Some(name.to_owned()),
        _ => None,
    };
    let settings = ops_runtime::deployment::Settings::from_vars(required).expect("settings");
    for (name, _) in settings.to_vars() {
        assert!(
            variables.contains(&format!("        {name}: ")),
            "template.yaml's Globals do not set {name} for the functions"
        );
    }
    let default = format!("Default: {}", ops_domain::access::DEFAULT_RATE_LIMIT);
    assert!(
        block(&template, "  RateLimit:").contains(&default),
        "the RateLimit parameter has the service's default ({default})"
    );
}

#[test]
fn read_endpoints_write_nothing() {
    let mut readers = 0;
    for block in functions(&template())
        .iter()
        .filter(|b| b.contains("- !Ref TableReadAccess\n"))
    {
        assert!(!block.contains("TableWriteAccess"), "{block}");
        assert!(
            !block.contains("dynamodb:UpdateItem"),
            "a read endpoint may write: {block}"
        );
        // The one reader that is no endpoint: the daily sweep of signing secrets.
        if block.contains("Handler: schedule-secret-sweep") {
            continue;
        }
        assert!(block.contains("Method: GET\n"), "{block}");
        readers += 1;
    }
    assert_eq!(readers, 56, "the GET endpoints");
}

#[test]
fn every_operator_signal_has_an_alarm() {
    let template = template();
    for signal in ops_domain::ports::signals::ALL {
        let named = format!("MetricName: {signal}\n");
        let alarm = alarms(&template)
            .into_iter()
            .map(|(_, alarm)| alarm)
            .find(|alarm| alarm.contains(&named));
        assert!(
            alarm.is_some_and(|alarm| alarm.contains("Namespace: PaymentOperations")
                && alarm.contains("{ Name: Environment, Value: !Ref Environment }")),
            "template.yaml has no alarm on the {signal} signal"
        );
    }
    assert_eq!(ops_infra::aws::NAMESPACE, "PaymentOperations");
}

#[test]
fn only_the_functions_that_let_go_of_signing_secrets_may_delete_them() {
    let template = template();
    let blocks = functions(&template);
    let deleters: Vec<&String> = blocks
        .iter()
        .filter(|b| b.contains("secretsmanager:DeleteSecret"))
        .collect();
    let handlers: Vec<&str> = deleters.iter().map(|b| values_of(b, "Handler:")[0].trim()).collect();
    assert_eq!(
        handlers,
        [
            "api-create-webhook-endpoint",
            "api-delete-webhook-endpoint",
            "api-rotate-webhook-secret",
            "schedule-secret-sweep"
        ]
    );
    for block in deleters {
        let granted = block
            .lines()
            .skip_while(|line| !line.contains("secretsmanager:DeleteSecret"))
            .nth(1)
            .unwrap_or_default();
        assert!(
            granted.trim_end().ends_with(":secret:ops/${Environment}/webhook/*\""),
            "signing secrets only: {block}"
        );
    }
}

/// Every function and the API log to the stack's one group, whose lines are kept a bounded
/// time: a request id is one query over all of them, and nothing is kept for ever.
#[test]
fn every_function_and_the_api_log_to_one_group_kept_a_bounded_time() {
    let template = template();
    let globals = block(&template, "  Function:");
    assert!(
        globals.contains("    LoggingConfig:\n      LogGroup: !Ref LogGroup"),
        "{globals}"
    );
    for function in functions(&template) {
        assert!(
            !function.contains("LoggingConfig"),
            "a function logs elsewhere: {function}"
        );
    }
    let group = block(&template, "  LogGroup:");
    assert!(group.contains("Type: AWS::Logs::LogGroup"), "{group}");
    assert!(group.contains("RetentionInDays: !Ref LogRetentionDays"), "{group}");
    let api = block(&template, "  HttpApi:");
    assert!(api.contains("DestinationArn: !GetAtt LogGroup.Arn"), "{api}");
    for field in [
        "$context.requestId",
        "$context.status",
        "$context.integration.requestId",
    ] {
        assert!(api.contains(field), "API Gateway's line lacks {field}");
    }
}

/// `sam deploy --config-env test|prod` passes each of its parameter overrides to a parameter
/// the template declares, with a value the parameter allows (CloudFormation refuses the whole
/// deploy otherwise).
#[test]
fn each_config_envs_parameters_are_declared_and_allowed() {
    let template = template();
    let samconfig = std::fs::read_to_string(repository().join("samconfig.toml")).unwrap();
    let overrides = values_of(&samconfig, "parameter_overrides = ");
    assert_eq!(overrides.len(), 2, "the test and prod config envs");
    for line in overrides {
        for pair in line.trim_matches('"').split_whitespace() {
            let (name, value) = pair.split_once('=').expect("Name=Value");
            let parameter = block(&template, &format!("  {name}:"));
            assert!(
                parameter.contains("    Type: "),
                "samconfig.toml sets {name}, which template.yaml does not declare"
            );
            if let Some(allowed) = values_of(&parameter, "AllowedValues: ").first() {
                let allowed: Vec<&str> = allowed
                    .trim_matches(['[', ']'])
                    .split(',')
                    .map(|v| v.trim().trim_matches('"'))
                    .collect();
                assert!(allowed.contains(&value), "{name}={value} is not one of {allowed:?}");
            }
            if let Some(min) = values_of(&parameter, "MinValue: ").first() {
                assert!(
                    value.parse::<i64>().unwrap() >= min.parse::<i64>().unwrap(),
                    "{name}={value} under {min}"
                );
            }
        }
    }
}

/// An alarm with no action tells no one: each one notifies the operators' topic when it fires
/// and when it clears, and the topic can mail an address or take any subscriber.
#[test]
fn every_alarm_notifies_the_operators_topic() {
    let template = template();
    let alarms = alarms(&template);
    assert_eq!(alarms.len(), 12);
    for (_, alarm) in alarms {
        for action in ["AlarmActions: [!Ref AlarmTopic]", "OKActions: [!Ref AlarmTopic]"] {
            assert!(alarm.contains(action), "no {action} in {alarm}");
        }
    }
    assert!(block(&template, "  AlarmTopic:").contains("Type: AWS::SNS::Topic"));
    let mail = block(&template, "  AlarmEmailSubscription:");
    assert!(
        mail.contains("Condition: HasAlarmEmail") && mail.contains("Endpoint: !Ref AlarmEmail"),
        "{mail}"
    );
    assert!(block(&template, "  AlarmTopicArn:").contains("Value: !Ref AlarmTopic"));
}

/// A queue's backlog (a payroll file's thousands of submissions, their webhooks) is worked by
/// a bounded number of instances: the rails' connectivity layer and the customers' receivers
/// are not flooded, and the account's concurrency is left to the API.
#[test]
fn every_queue_is_worked_by_a_bounded_number_of_instances() {
    let template = template();
    let mut queues = 0;
    for function in functions(&template) {
        let sources = function.matches("Type: SQS\n").count();
        assert_eq!(function.matches("MaximumConcurrency: ").count(), sources, "{function}");
        queues += sources;
    }
    assert_eq!(
        queues, 7,
        "submissions, webhooks, files, their dead letters and schedule firings' dead letters"
    );
    for parameter in ["RailSubmitConcurrency", "WebhookSendConcurrency"] {
        // SQS event sources take 2 to 1,000.
        let declared = block(&template, &format!("  {parameter}:"));
        assert!(
            declared.contains("MinValue: 2") && declared.contains("MaxValue: 1000"),
            "{declared}"
        );
    }
}

/// The table holds every operation and its audit trail: deleting the stack keeps it, point-in-
/// time recovery can bring back any second of the last 35 days, and a production table cannot
/// be deleted by hand while its protection is on.
#[test]
fn the_table_outlives_its_stack_and_a_production_table_a_careless_hand() {
    let table = block(&template(), "  Table:");
    for setting in [
        "DeletionPolicy: Retain",
        "PointInTimeRecoveryEnabled: true",
        "SSEEnabled: true",
        "DeletionProtectionEnabled: !If [IsProduction, true, false]",
    ] {
        assert!(table.contains(setting), "the table lacks {setting}");
    }
}

/// A stream batch that fails for good leaves a note on the failures queue naming its function,
/// and `stream-replay` finds the consumer by that name: each stream function is named for its
/// handler and sends its failures there, and the replay reads that queue.
#[test]
fn every_stream_functions_failures_can_be_replayed() {
    let template = template();
    let mut streams = 0;
    for function in functions(&template).iter().filter(|f| f.contains("Type: DynamoDB\n")) {
        let handler = values_of(function, "Handler: ")[0];
        assert!(
            function.contains(&format!("FunctionName: !Sub \"${{AWS::StackName}}-{handler}\"")),
            "{function}"
        );
        assert!(
            function.contains("Destination: !GetAtt StreamFailuresQueue.Arn"),
            "{function}"
        );
        streams += 1;
    }
    assert_eq!(streams, 4);
    let replay = functions(&template)
        .into_iter()
        .find(|f| f.contains("Handler: stream-replay\n"))
        .expect("the replay function");
    assert!(replay.contains(&format!(
        "{}: !Ref StreamFailuresQueue",
        ops_runtime::replay::FAILURES_QUEUE_URL
    )));
    assert!(
        replay.contains("QueueName: !GetAtt StreamFailuresQueue.QueueName"),
        "{replay}"
    );
    assert!(replay.contains("Resource: !GetAtt Table.StreamArn"), "{replay}");
}

/// Whoever an alarm wakes finds what it means and what to do under its name in the runbook.
#[test]
fn every_alarm_has_its_section_in_the_runbook() {
    let template = template();
    let runbook = std::fs::read_to_string(repository().join("docs/runbook.md")).unwrap();
    for (alarm, _) in alarms(&template) {
        assert!(
            runbook.contains(&format!("\n## {alarm}\n")),
            "docs/runbook.md has no section for {alarm}"
        );
    }
}

/// The API's functions are what the endpoint list makes them: a function edited by hand, or an
/// endpoint added without running the writer, fails here.
#[test]
fn the_api_functions_are_written_from_the_endpoint_list() {
    let template = template();
    let made = ops_lambda::template::with_api_functions(&template).unwrap();
    assert!(
        made == template,
        "template.yaml's API functions differ from the endpoint list's: run `cargo run -p ops-lambda --example template`"
    );
    // A read given write access by hand is a difference.
    let at = template.find(ops_lambda::template::BEGIN).unwrap();
    let section = template[at..].replacen("TableReadAccess", "TableWriteAccess", 1);
    let edited = format!("{}{section}", &template[..at]);
    assert!(ops_lambda::template::with_api_functions(&edited).unwrap() != edited);
}

/// The documented command that serves the API on a deployed stack sets every variable the
/// settings require, each named by an output of the stack, and leaves the pipeline to the
/// stack's functions.
#[test]
fn the_documented_command_for_a_deployed_stack_sets_every_setting_from_the_outputs() {
    let guide = std::fs::read_to_string(repository().join("docs/aws.md")).unwrap();
    let command: String = guide
        .lines()
        .skip_while(|line| !line.starts_with("# against a deployed stack"))
        .take_while(|line| !line.starts_with("```"))
        .filter(|line| !line.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let set: Vec<(&str, &str)> = command
        .split_whitespace()
        .filter_map(|word| word.split_once('='))
        .collect();
    assert!(set.contains(&("OPS_WORKER", "false")), "{command}");
    let value = |name: &str| set.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string());
    ops_runtime::deployment::Settings::from_vars(value).unwrap_or_else(|e| panic!("{e}: {command}"));
    let template = template();
    let outputs = block(&template, "Outputs:");
    for (name, output) in [
        ("TABLE_NAME", "TableName"),
        ("SUBMISSIONS_QUEUE_URL", "SubmissionsQueueUrl"),
        ("WEBHOOKS_QUEUE_URL", "WebhooksQueueUrl"),
        ("FILES_QUEUE_URL", "FilesQueueUrl"),
        ("FILES_BUCKET", "FilesBucketName"),
    ] {
        assert!(value(name).is_some(), "the command does not set {name}");
        assert!(
            outputs.contains(&format!("  {output}:\n")),
            "no {output} output for {name}"
        );
        assert!(
            guide.contains(&format!("`{output}`")),
            "docs/aws.md does not name the {output} output"
        );
    }
}
