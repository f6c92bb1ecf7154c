use crate::spawn_aws_app;

#[tokio::test]
async fn a_keys_history_is_read_from_dynamodb() {
    ops_tests::scenarios::a_keys_history_names_each_change_and_its_actor(&spawn_aws_app().await.api).await;
}
