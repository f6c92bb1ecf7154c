//! ISO 20022 customer credit transfer initiations (`pain.001`), as corporate customers' ERPs
//! export them, read into payout lines. Versions .001.03 to .001.11 share the elements read
//! here (the requested execution date changed shape in .001.08, and is not read).
//!
//! The XML is read twice with `quick-xml`: once as a stream of events, which refuses a DTD
//! (no entity is ever declared, so none is expanded), bounds the depth and checks the root,
//! then with its serde deserializer into the structs below, each element optional so that
//! everything missing is reported by its path rather than by the first one serde meets. Every
//! check of a payroll CSV's line applies to each `CdtTrfTxInf`; each error names the message,
//! the payment information and the transaction it is in, with the element's path and line.

use super::csv_lines::{Errors, LineError, PayrollLine};
use super::iso_xml::{check_structure, place, refused};
use super::pain001_document::*;
use crate::error::DomainError;
use crate::money::{Currency, MAX_ITEM_AMOUNT};
use crate::operations::{Beneficiary, Destination};
use crate::validate::item_field;
use serde::{Deserialize, Serialize};

/// The namespace of a pain.001 version, less the version.
const NAMESPACE: &str = "urn:iso:std:iso:20022:tech:xsd:pain.001.001.";
/// The versions read (the number after `pain.001.001.`).
pub const VERSIONS: std::ops::RangeInclusive<u8> = 3..=11;
/// The most payment informations a message may hold: each is chunked apart, and a file keeps
/// its chunks and payment informations in its one stored document.
pub const MAX_PAYMENT_INFORMATIONS: usize = 100;
const ROOT: &str = "/Document/CstmrCdtTrfInitn";

/// What a pain.001 says about itself beside its transactions, kept with the file for its
/// status report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Initiation {
    /// `pain.001.001.NN`.
    pub version: u8,
    pub message_id: String,
    /// `GrpHdr/CreDtTm`, as written.
    pub created_at: String,
    pub number_of_transactions: usize,
    /// `GrpHdr/CtrlSum`, as written, when there was one.
    pub control_sum: Option<String>,
    pub payment_informations: Vec<PaymentInformation>,
}

impl Initiation {
    pub fn message_name(&self) -> String {
        format!("pain.001.001.{:02}", self.version)
    }
}

/// One `PmtInf` block: its id and what it held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaymentInformation {
    pub id: String,
    pub number_of_transactions: usize,
    pub control_sum: Option<String>,
}

/// A pain.001 read whole: what it says of itself, and its transactions as payout lines in
/// document order.
#[derive(Debug, Clone)]
pub struct Pain001 {
    pub initiation: Initiation,
    pub lines: Vec<PayrollLine>,
}

/// An ISO `DecimalNumber` (at most 17 decimals) as an integer of 10⁻¹⁷ units, to compare
/// control sums exactly.
fn decimal(text: &str) -> Option<i128> {
    let (whole, fraction) = text.trim().split_once('.').unwrap_or((text.trim(), ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 18 || fraction.len() > 17 || !digits(whole) || !digits(fraction) {
        return None;
    }
    let scaled = format!("{whole}{fraction:0<17}");
    scaled.parse().ok()
}

/// A `Max35Text` identifier: 1 to 35 characters once trimmed.
fn identifier(value: Option<&String>) -> Result<String, &'static str> {
    match value.map(|v| v.trim()) {
        None | Some("") => Err("missing"),
        Some(id) if id.chars().count() > 35 => Err("too_long"),
        Some(id) => Ok(id.to_owned()),
    }
}

/// Where in the document a check is: the element's path, and the payment information and
/// transaction it is in.
#[derive(Clone, Default)]
struct Place {
    path: String,
    payment_information: Option<String>,
    end_to_end_id: Option<String>,
}

impl Place {
    fn error(&self, element: &str, code: &str, message: impl Into<String>) -> LineError {
        let path = match element {
            "" => self.path.clone(),
            _ => format!("{}/{element}", self.path),
        };
        let mut error = LineError::new(1, None, code, message);
        error.path = Some(path);
        error.payment_information = self.payment_information.clone();
        error.end_to_end_id = self.end_to_end_id.clone();
        error
    }

    /// A check of the item rules (`item_field`) failed: its code and message, at `element`.
    fn refusal(&self, element: &str, refused: DomainError) -> LineError {
        match refused {
            DomainError::InvalidRequest { code, message, .. } => self.error(element, code, message),
            other => self.error(element, "invalid_transaction", other.to_string()),
        }
    }
}

/// Reads and checks a pain.001 whose payouts go to `rail`: everything it holds if it is
/// valid, else every error (up to the reported limit) and how many there were.
pub fn parse(bytes: &[u8], rail: &str) -> Result<Pain001, (Vec<LineError>, usize)> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            let line = 1 + bytes[..error.valid_up_to()].iter().filter(|b| **b == b'\n').count();
            return Err(refused(line, "invalid_encoding", "The file is not UTF-8 text."));
        }
    };
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(refused(1, "empty_file", "The file is empty."));
    }
    let version = check_structure(text, "pain.001", NAMESPACE, VERSIONS)?;
    let document: Document = quick_xml::de::from_str(text)
        .map_err(|error| refused(1, "invalid_pain001", format!("Not a pain.001 document: {error}.")))?;
    let initn = document
        .cstmr_cdt_trf_initn
        .ok_or_else(|| refused(1, "invalid_pain001", format!("The document has no {ROOT}.")))?;
    let mut errors = vec![];
    let group = Place {
        path: format!("{ROOT}/GrpHdr"),
        ..Place::default()
    };
    let header = initn.grp_hdr.as_ref();
    let message_id = identifier(header.and_then(|h| h.msg_id.as_ref())).unwrap_or_else(|problem| {
        errors.push(group.error(
            "MsgId",
            "invalid_message_id",
            format!("MsgId is {problem}: the message's id is 1 to 35 characters."),
        ));
        String::new()
    });
    let created_at = match header.and_then(|h| h.cre_dt_tm.as_deref()).map(str::trim) {
        Some(at) if !at.is_empty() => at.to_owned(),
        _ => {
            errors.push(group.error(
                "CreDtTm",
                "parameter_missing",
                "CreDtTm, when the message was made, is missing.",
            ));
            String::new()
        }
    };
    let declared_count = header.and_then(|h| h.nb_of_txs.as_deref()).map(str::trim);
    let declared_sum = header.and_then(|h| h.ctrl_sum.as_deref()).map(str::trim);
    if initn.pmt_inf.len() > MAX_PAYMENT_INFORMATIONS {
        let place = Place {
            path: format!("{ROOT}/PmtInf[{}]", MAX_PAYMENT_INFORMATIONS + 1),
            ..Place::default()
        };
        errors.push(place.error(
            "",
            "too_many_payment_informations",
            format!(
                "The message has {} payment informations; at most {MAX_PAYMENT_INFORMATIONS} are taken in one file. Group its transactions into fewer (one per debtor account and execution date), or send several files.",
                initn.pmt_inf.len()
            ),
        ));
    }
    if initn.pmt_inf.is_empty() {
        errors.push(
            Place {
                path: ROOT.into(),
                ..Place::default()
            }
            .error(
                "PmtInf",
                "empty_file",
                "The message has no payment information (PmtInf).",
            ),
        );
    }
    let mut lines = vec![];
    let mut payment_informations = vec![];
    let (mut count, mut sum) = (0usize, 0i128);
    for (p, block) in initn.pmt_inf.iter().enumerate() {
        let mut place = Place {
            path: format!("{ROOT}/PmtInf[{}]", p + 1),
            ..Place::default()
        };
        let id = identifier(block.pmt_inf_id.as_ref()).unwrap_or_else(|problem| {
            errors.push(place.error(
                "PmtInfId",
                "invalid_payment_information_id",
                format!("PmtInfId is {problem}: it is 1 to 35 characters."),
            ));
            String::new()
        });
        if !id.is_empty()
            && payment_informations
                .iter()
                .any(|seen: &PaymentInformation| seen.id == id)
        {
            errors.push(place.error(
                "PmtInfId",
                "duplicate_payment_information",
                format!("Payment information {id} appears twice in the message."),
            ));
        }
        place.payment_information = Some(id.clone()).filter(|id| !id.is_empty());
        match block.pmt_mtd.as_deref().map(str::trim) {
            Some("TRF") => {}
            Some(other) => errors.push(place.error(
                "PmtMtd",
                "unsupported_payment_method",
                format!("PmtMtd is {other:?}; only credit transfers (TRF) are taken."),
            )),
            None => errors.push(place.error(
                "PmtMtd",
                "parameter_missing",
                "PmtMtd is missing; credit transfers are TRF.",
            )),
        }
        if block.cdt_trf_tx_inf.is_empty() {
            errors.push(place.error(
                "CdtTrfTxInf",
                "parameter_missing",
                "The payment information has no transaction (CdtTrfTxInf).",
            ));
        }
        let mut block_sum = 0i128;
        for (t, transaction) in block.cdt_trf_tx_inf.iter().enumerate() {
            let mut at = Place {
                path: format!("{}/CdtTrfTxInf[{}]", place.path, t + 1),
                ..place.clone()
            };
            let payment_id = transaction.pmt_id.as_ref();
            let end_to_end_id = match identifier(payment_id.and_then(|id| id.end_to_end_id.as_ref())) {
                Ok(id) => Some(id),
                Err(problem) => {
                    errors.push(at.error(
                        "PmtId/EndToEndId",
                        "invalid_end_to_end_id",
                        format!("EndToEndId is {problem}: it is 1 to 35 characters."),
                    ));
                    None
                }
            };
            at.end_to_end_id = end_to_end_id.clone();
            let instruction_id = match payment_id.and_then(|id| id.instr_id.as_ref()) {
                None => None,
                Some(given) => match identifier(Some(given)) {
                    Ok(id) => Some(id),
                    Err(problem) => {
                        errors.push(at.error(
                            "PmtId/InstrId",
                            "invalid_instruction_id",
                            format!("InstrId is {problem}: it is 1 to 35 characters."),
                        ));
                        None
                    }
                },
            };
            let before = errors.len();
            let money = match transaction.amt.as_ref() {
                Some(AmountChoice {
                    instd_amt: Some(money), ..
                }) => Some(money),
                Some(AmountChoice { eqvt_amt: Some(_), .. }) => {
                    errors.push(at.error(
                        "Amt/EqvtAmt",
                        "equivalent_amount_not_supported",
                        "Send the amount as InstdAmt in the currency the beneficiary is paid in; EqvtAmt is not taken.",
                    ));
                    None
                }
                _ => {
                    errors.push(at.error(
                        "Amt/InstdAmt",
                        "parameter_missing",
                        "Amt/InstdAmt, the amount, is missing.",
                    ));
                    None
                }
            };
            let currency = money.and_then(|money| match money.currency.as_deref().map(str::trim) {
                Some(code) => Currency::parse(code).or_else(|| {
                    let shown: String = code.chars().take(16).collect();
                    errors.push(at.error(
                        "Amt/InstdAmt/@Ccy",
                        "invalid_currency",
                        format!("'{shown}' is not an active ISO 4217 currency code."),
                    ));
                    None
                }),
                None => {
                    errors.push(at.error("Amt/InstdAmt/@Ccy", "parameter_missing", "InstdAmt has no Ccy."));
                    None
                }
            });
            let value = money.and_then(|m| m.value.as_deref()).map(str::trim).unwrap_or("");
            // Saturating: amounts of 18 digits each could otherwise overflow it in a large file.
            block_sum = block_sum.saturating_add(decimal(value).unwrap_or(0));
            let amount = currency.as_ref().and_then(|currency| {
                let units = currency.units_of(value).filter(|u| *u > 0 && *u <= MAX_ITEM_AMOUNT);
                if units.is_none() {
                    errors.push(at.error(
                        "Amt/InstdAmt",
                        "invalid_amount",
                        format!(
                            "{value:?} is not an amount of {currency}: a decimal with at most {} decimals, above 0 and at most {MAX_ITEM_AMOUNT} minor units.",
                            currency.minor_digits()
                        ),
                    ));
                }
                units.and_then(|units| item_field::amount(Some(units), "amount").ok())
            });
            let account_id = transaction.cdtr_acct.as_ref().and_then(|a| a.id.as_ref());
            let (account_scheme, account) = match account_id {
                Some(AccountId { iban: Some(iban), .. }) => ("iban", Some(iban.trim().to_owned())),
                Some(AccountId { othr: Some(other), .. }) => {
                    ("account", other.id.as_ref().map(|id| id.trim().to_owned()))
                }
                _ => ("account", None),
            };
            let account = match item_field::account(account.filter(|a| !a.is_empty()), "account") {
                Ok(account) => Some(account),
                Err(refused) => {
                    errors.push(at.refusal("CdtrAcct/Id", refused));
                    None
                }
            };
            let beneficiary = match beneficiary_of(transaction.cdtr.as_ref(), account_scheme, account.as_deref()) {
                Ok(beneficiary) => beneficiary,
                Err((element, refused)) => {
                    errors.push(at.refusal(element, refused));
                    None
                }
            };
            let text = transaction
                .rmt_inf
                .as_ref()
                .map(|r| r.ustrd.iter().map(|u| u.trim()).collect::<Vec<_>>().join(" "));
            let reference = match item_field::reference(text.filter(|t| !t.is_empty()), "reference") {
                Ok(reference) => reference,
                Err(refused) => {
                    errors.push(at.refusal("RmtInf/Ustrd", refused));
                    None
                }
            };
            if let (Some(amount), Some(currency), Some(account), Some(beneficiary), true) =
                (amount, currency, account, beneficiary, errors.len() == before)
            {
                lines.push(PayrollLine {
                    line: lines.len() + 1,
                    group: p,
                    end_to_end_id,
                    instruction_id,
                    beneficiary,
                    destination: Destination {
                        rail: rail.to_owned(),
                        account,
                        account_id: None,
                    },
                    amount,
                    currency,
                    reference,
                });
            }
        }
        count += block.cdt_trf_tx_inf.len();
        sum = sum.saturating_add(block_sum);
        check_totals(
            &place,
            block.nb_of_txs.as_deref(),
            block.ctrl_sum.as_deref(),
            block.cdt_trf_tx_inf.len(),
            block_sum,
            &mut errors,
        );
        payment_informations.push(PaymentInformation {
            id,
            number_of_transactions: block.cdt_trf_tx_inf.len(),
            control_sum: block.ctrl_sum.as_deref().map(|s| s.trim().to_owned()),
        });
    }
    if declared_count.is_none() {
        errors.push(group.error(
            "NbOfTxs",
            "parameter_missing",
            "NbOfTxs, the message's number of transactions, is missing.",
        ));
    }
    check_totals(&group, declared_count, declared_sum, count, sum, &mut errors);
    if !errors.is_empty() {
        place(text, &mut errors);
        let mut reported = Errors::default();
        errors.into_iter().for_each(|e| reported.push(e));
        return Err(reported.finish());
    }
    Ok(Pain001 {
        initiation: Initiation {
            version,
            message_id,
            created_at,
            number_of_transactions: count,
            control_sum: declared_sum.map(str::to_owned),
            payment_informations,
        },
        lines,
    })
}

/// A declared number of transactions and control sum (each optional) against what was counted.
fn check_totals(
    place: &Place,
    count: Option<&str>,
    sum: Option<&str>,
    counted: usize,
    summed: i128,
    errors: &mut Vec<LineError>,
) {
    if let Some(declared) = count {
        if declared.parse::<usize>().ok() != Some(counted) {
            errors.push(place.error(
                "NbOfTxs",
                "number_of_transactions_mismatch",
                format!("NbOfTxs is {declared:?}, but {counted} transaction(s) follow."),
            ));
        }
    }
    if let Some(declared) = sum {
        match decimal(declared) {
            Some(value) if value == summed => {}
            Some(_) => {
                let whole = summed / 10i128.pow(17);
                let fraction = format!("{:017}", summed % 10i128.pow(17));
                let fraction = fraction.trim_end_matches('0');
                let counted = if fraction.is_empty() {
                    whole.to_string()
                } else {
                    format!("{whole}.{fraction}")
                };
                errors.push(place.error(
                    "CtrlSum",
                    "control_sum_mismatch",
                    format!("CtrlSum is {declared}, but the amounts add up to {counted}."),
                ));
            }
            None => errors.push(place.error(
                "CtrlSum",
                "invalid_control_sum",
                format!("CtrlSum {declared:?} is not a decimal number."),
            )),
        }
    }
}

/// The beneficiary of a transaction: the creditor's first identification (its scheme's code,
/// lower case, as the id type), an organisation's BIC, else its account (`iban` or `account`).
fn beneficiary_of(
    creditor: Option<&Party>,
    account_scheme: &str,
    account: Option<&str>,
) -> Result<Option<Beneficiary>, (&'static str, DomainError)> {
    let id = creditor.and_then(|c| c.id.as_ref());
    let (identification, element) = match id {
        Some(PartyId { org_id: Some(org), .. }) => (Some(org), "Cdtr/Id/OrgId"),
        Some(PartyId {
            prvt_id: Some(person), ..
        }) => (Some(person), "Cdtr/Id/PrvtId"),
        _ => (None, "Cdtr/Id"),
    };
    let (id_type, id) = match identification {
        Some(Identification {
            othr,
            any_bic,
            bic_or_bei,
        }) => match (othr.first(), any_bic.as_ref().or(bic_or_bei.as_ref())) {
            (Some(other), _) => {
                let scheme = other.schme_nm.as_ref().and_then(|s| s.cd.as_ref().or(s.prtry.as_ref()));
                (
                    scheme.map_or("other".to_owned(), |s| s.trim().to_lowercase()),
                    other.id.clone(),
                )
            }
            (None, Some(bic)) => ("bic".to_owned(), Some(bic.clone())),
            (None, None) => ("other".to_owned(), None),
        },
        None => match account {
            Some(account) => (account_scheme.to_owned(), Some(account.to_owned())),
            // The account's own error says what is missing.
            None => return Ok(None),
        },
    };
    let id_type = item_field::beneficiary_id_type(Some(id_type), "id_type").map_err(|e| (element, e))?;
    let id = item_field::beneficiary_id(id.map(|i| i.trim().to_owned()).filter(|i| !i.is_empty()), "id")
        .map_err(|e| (element, e))?;
    Ok(Some(Beneficiary { id_type, id }))
}
