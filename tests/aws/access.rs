use crate::spawn_aws_app;

#[tokio::test]
async fn a_keys_history_is_read_from_dynamodb() {
    ops_tests::scenarios::a_keys_history_names_each_change_and_its_actor(&spawn_aws_app().await.api).await;
}

#[tokio::test]
async fn a_users_roles_and_status_apply_from_their_next_request_and_are_in_their_history() {
    ops_tests::scenarios::a_users_roles_and_status_apply_from_their_next_request(&spawn_aws_app().await.api).await;
}

#[tokio::test]
async fn customers_are_listed_for_the_platform_and_each_reads_its_own() {
    ops_tests::scenarios::customers_are_listed_for_the_platform_and_each_reads_its_own(&spawn_aws_app().await.api)
        .await;
}

#[tokio::test]
async fn a_suspended_customers_keys_are_refused_until_it_is_reactivated() {
    ops_tests::scenarios::a_suspended_customers_keys_are_refused_until_it_is_reactivated(&spawn_aws_app().await.api)
        .await;
}
