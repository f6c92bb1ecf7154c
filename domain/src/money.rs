//! Money: amounts are integers in the currency's minor unit; currencies are ISO 4217 codes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest amount one item may carry, in minor units (a guard against typos and overflow:
/// 1,000 items at this amount still fit in an `i64`).
pub const MAX_ITEM_AMOUNT: i64 = 999_999_999_999;

/// A positive amount in minor units. Construction checks the range, so every `Amount` in the
/// system is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Amount(i64);

impl Amount {
    pub fn new(minor_units: i64) -> Option<Amount> {
        (1..=MAX_ITEM_AMOUNT)
            .contains(&minor_units)
            .then_some(Amount(minor_units))
    }

    pub fn minor_units(self) -> i64 {
        self.0
    }
}

/// Sum of amounts; `None` on overflow (cannot happen within the item limits, checked anyway).
pub fn total(amounts: impl IntoIterator<Item = Amount>) -> Option<i64> {
    amounts
        .into_iter()
        .try_fold(0i64, |sum, amount| sum.checked_add(amount.0))
}

/// An active ISO 4217 alphabetic code.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Currency(String);

// Active ISO 4217 codes (list 1, 2024), excluding funds and precious-metal codes.
const ISO_4217: &str = "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND \
BOB BRL BSD BTN BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB \
EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY \
KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR \
MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF \
SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS \
UAH UGX USD UYU UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG";

/// The currencies whose amounts have no digits after the point (every other has two, but
/// [`THREE_MINOR_DIGITS`]'s). The board page shows amounts by the same lists.
pub const NO_MINOR_UNIT: &str = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX VND VUV XAF XOF XPF";
pub const THREE_MINOR_DIGITS: &str = "BHD IQD JOD KWD LYD OMR TND";

impl Currency {
    /// Every code [`Currency::parse`] takes, in alphabetical order (the API document lists them).
    pub fn known_codes() -> impl Iterator<Item = &'static str> {
        ISO_4217.split_ascii_whitespace()
    }

    pub fn parse(code: &str) -> Option<Currency> {
        let well_formed = code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase());
        (well_formed && ISO_4217.split_ascii_whitespace().any(|known| known == code)).then(|| Currency(code.to_owned()))
    }

    pub fn code(&self) -> &str {
        &self.0
    }

    /// Digits after the decimal point in amounts of this currency (ISO 4217's minor unit).
    pub fn minor_digits(&self) -> u32 {
        let listed = |list: &str| list.split_ascii_whitespace().any(|code| code == self.0);
        if listed(NO_MINOR_UNIT) {
            0
        } else if listed(THREE_MINOR_DIGITS) {
            3
        } else {
            2
        }
    }

    /// Reads a decimal amount (`1234.5`) into minor units; `None` if it is not a positive
    /// amount of this currency (more decimals than it has, a sign, separators).
    pub fn minor_units_of(&self, decimal: &str) -> Option<Amount> {
        self.units_of(decimal).and_then(Amount::new)
    }

    /// Reads a decimal of this currency (`0`, `1234.5`) into minor units, zero included (a
    /// balance may be nothing); `None` for a sign, separators or more decimals than it has.
    pub fn units_of(&self, decimal: &str) -> Option<i64> {
        let (whole, fraction) = decimal.split_once('.').unwrap_or((decimal, ""));
        let digits = self.minor_digits() as usize;
        let digit_run = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || whole.len() > 15 || !digit_run(whole) || !digit_run(fraction) || fraction.len() > digits
        {
            return None;
        }
        format!("{whole}{fraction:0<digits$}").parse().ok()
    }
}

impl TryFrom<String> for Currency {
    type Error = String;
    fn try_from(code: String) -> Result<Self, Self::Error> {
        Currency::parse(&code).ok_or_else(|| format!("unknown currency {code}"))
    }
}

impl From<Currency> for String {
    fn from(currency: Currency) -> String {
        currency.0
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_amounts_are_read_in_the_currency_s_minor_unit() {
        let currency = |code| super::Currency::parse(code).unwrap();
        let units = |code, text| currency(code).minor_units_of(text).map(super::Amount::minor_units);
        assert_eq!(units("EUR", "12.3"), Some(1230));
        assert_eq!(units("EUR", "12"), Some(1200));
        assert_eq!(units("JPY", "1500"), Some(1500));
        assert_eq!(units("KWD", "1.005"), Some(1005));
        assert_eq!(units("JPY", "15.5"), None);
        assert_eq!(units("EUR", "1.234"), None);
        assert_eq!(units("EUR", "-1.00"), None);
        assert_eq!(units("EUR", "1,000.00"), None);
        assert_eq!(units("EUR", ".5"), None);
        assert_eq!(units("EUR", "0.00"), None);
    }

    use super::*;

    #[test]
    fn amounts_must_be_positive_and_bounded() {
        assert!(Amount::new(0).is_none());
        assert!(Amount::new(-5).is_none());
        assert!(Amount::new(MAX_ITEM_AMOUNT + 1).is_none());
        assert_eq!(Amount::new(1).map(Amount::minor_units), Some(1));
        assert_eq!(
            Amount::new(MAX_ITEM_AMOUNT).map(Amount::minor_units),
            Some(MAX_ITEM_AMOUNT)
        );
    }

    #[test]
    fn totals_add_up_and_overflow_is_detected() {
        let a = Amount::new(MAX_ITEM_AMOUNT).unwrap();
        assert_eq!(total([a, Amount::new(1).unwrap()]), Some(MAX_ITEM_AMOUNT + 1));
        assert_eq!(total(std::iter::repeat_n(a, 10_000_000)), None);
    }

    #[test]
    fn only_active_uppercase_iso_codes_are_currencies() {
        for good in ["CLP", "USD", "MXN", "EUR", "JPY"] {
            assert!(Currency::parse(good).is_some(), "{good}");
        }
        for bad in ["usd", "US", "USDD", "ABC", "", "XAU", "U$D"] {
            assert!(Currency::parse(bad).is_none(), "{bad}");
        }
    }
}
