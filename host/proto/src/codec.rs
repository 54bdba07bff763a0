//! The codec of every service and client in this crate: prost's, with smaller buffers.
//!
//! tonic gives each call's encoder and decoder a buffer of 8 KiB up front, and keeps both for as
//! long as the call lasts. A daemon with 10,000 client sessions keeps about 20,000 streams open
//! (each session's KeepAlive stream, each holder's Lost stream or waiter's Acquire), whose
//! messages are a few dozen bytes. The buffers here start at [`BUFFER`] bytes and grow as a
//! message needs (a published component's megabytes included).

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Where each call's encode and decode buffers start.
pub const BUFFER: usize = 512;

/// How much an encoder batches (messages ready at once) before it hands a chunk to HTTP/2:
/// tonic's default.
const YIELD_THRESHOLD: usize = 32 * 1024;

fn settings() -> BufferSettings {
    BufferSettings::new(BUFFER, YIELD_THRESHOLD)
}

/// prost's encoding (`application/grpc+proto`) with buffers of [`BUFFER`] bytes to start.
#[derive(Debug, Clone)]
pub struct LeanCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        LeanCodec(PhantomData)
    }
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}
