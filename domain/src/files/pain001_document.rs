//! A pain.001's elements as its serde reading takes them: each one optional, so that the
//! checks in `pain001` report everything missing by its path.

use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Document {
    pub(super) cstmr_cdt_trf_initn: Option<Initn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Initn {
    pub(super) grp_hdr: Option<GroupHeader>,
    #[serde(default)]
    pub(super) pmt_inf: Vec<PmtInf>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct GroupHeader {
    pub(super) msg_id: Option<String>,
    pub(super) cre_dt_tm: Option<String>,
    pub(super) nb_of_txs: Option<String>,
    pub(super) ctrl_sum: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct PmtInf {
    pub(super) pmt_inf_id: Option<String>,
    pub(super) pmt_mtd: Option<String>,
    pub(super) nb_of_txs: Option<String>,
    pub(super) ctrl_sum: Option<String>,
    #[serde(default)]
    pub(super) cdt_trf_tx_inf: Vec<TxInf>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct TxInf {
    pub(super) pmt_id: Option<PaymentId>,
    pub(super) amt: Option<AmountChoice>,
    pub(super) cdtr: Option<Party>,
    pub(super) cdtr_acct: Option<Account>,
    pub(super) rmt_inf: Option<Remittance>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct PaymentId {
    pub(super) instr_id: Option<String>,
    pub(super) end_to_end_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct AmountChoice {
    pub(super) instd_amt: Option<Money>,
    pub(super) eqvt_amt: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
pub(super) struct Money {
    #[serde(rename = "@Ccy")]
    pub(super) currency: Option<String>,
    #[serde(rename = "$text")]
    pub(super) value: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Party {
    pub(super) id: Option<PartyId>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct PartyId {
    pub(super) org_id: Option<Identification>,
    pub(super) prvt_id: Option<Identification>,
}

/// An organisation's or a person's identification: the first `Othr`, or an organisation's BIC
/// (`AnyBIC` from .001.08, `BICOrBEI` before).
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Identification {
    #[serde(rename = "AnyBIC")]
    pub(super) any_bic: Option<String>,
    #[serde(rename = "BICOrBEI")]
    pub(super) bic_or_bei: Option<String>,
    #[serde(default)]
    pub(super) othr: Vec<OtherId>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct OtherId {
    pub(super) id: Option<String>,
    pub(super) schme_nm: Option<SchemeName>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct SchemeName {
    pub(super) cd: Option<String>,
    pub(super) prtry: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Account {
    pub(super) id: Option<AccountId>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct AccountId {
    #[serde(rename = "IBAN")]
    pub(super) iban: Option<String>,
    pub(super) othr: Option<OtherId>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct Remittance {
    #[serde(default)]
    pub(super) ustrd: Vec<String>,
}
